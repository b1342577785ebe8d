"""OdradekConnect's ``spec.plugins`` (``connect_plugins``): the spec checked, the init container and
volume the workers' Deployment gets, and the download itself, against a local repository (a jar
whose checksum lies) and against Maven Central with a small real artifact (Kafka's REST basic
authentication extension, ~20 kB). No API server, no JVM: the Deployment on the real API server
is checked in test_operator_k8s_connect.py."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import threading
import zipfile

import pytest

from odradek.operator import connect, connect_plugins
from odradek.operator.spec import DEFAULT_IMAGE, SpecError
from tests.operator.plans import cluster_spec
from tests.support.tools import tool_missing

BASIC_AUTH = "org.apache.kafka:connect-basic-auth-extension:3.9.1"
PLUGINS = [{"name": "basic-auth", "artifacts": [{"maven": BASIC_AUTH}]}]


@pytest.mark.parametrize("plugins, message", [
    ([{"name": "p", "artifacts": [{"maven": "org.x:y"}]}], "is not group:artifact:version"),
    ([{"name": "p", "artifacts": [{"maven": "..:y:1"}]}], "is not group:artifact:version"),
    ([{"name": "p", "artifacts": [{"maven": "org.x:y/../../z:1"}]}], "is not group:artifact:version"),
    ([{"name": "../p", "artifacts": [{"maven": "org.x:y:1"}]}], "unique lower-case name"),
    ([{"name": "p", "artifacts": [{"maven": "o:a:1"}]}, {"name": "p", "artifacts": [{"maven": "o:b:1"}]}],
     "unique lower-case name"),
    ([{"name": "p", "artifacts": []}], "name at least one"),
    ([{"name": "p", "artifacts": [{"maven": "o:a:1", "sha512sum": "abc"}]}], "not a SHA-512")])
def test_plugins_that_could_not_be_fetched_safely_are_refused(plugins, message):
    with pytest.raises(SpecError, match=message):
        connect.parse_connect("k", {"plugins": plugins})


def test_a_repository_must_be_http():
    with pytest.raises(SpecError, match="pluginRepository"):
        connect.parse_connect("k", {"plugins": PLUGINS, "pluginRepository": "file:///etc"})
    assert connect_plugins.artifact_path(BASIC_AUTH) == (
        "org/apache/kafka/connect-basic-auth-extension/3.9.1/connect-basic-auth-extension-3.9.1.jar")


def test_the_workers_get_an_init_container_filling_a_volume_on_their_plugin_path():
    spec = connect.parse_connect("k", {"plugins": PLUGINS, "pluginRepository": "https://maven.example/repo/"})
    acc = connect.cluster_access("c", "data", cluster_spec({}), spec)
    assert connect.worker_properties(spec, acc)["plugin.path"] == "/opt/kafka/plugins,/mnt/connect-plugins"
    deployment = connect.build_connect("k", "data", spec, acc, tools_image="odradek:test")[-1]
    pod = deployment["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["image"] == "odradek:test"
    assert init["command"] == ["python", "-m", "odradek.operator.connect_plugins", "/mnt/connect-plugins"]
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env["ODRADEK_CONNECT_PLUGIN_REPOSITORY"] == "https://maven.example/repo"
    assert json.loads(env["ODRADEK_CONNECT_PLUGINS"]) == [
        {"name": "basic-auth", "artifacts": [{"maven": BASIC_AUTH, "sha512sum": None}]}]
    assert init["securityContext"]["readOnlyRootFilesystem"]   # hardened as the workers
    assert {"name": "plugins", "emptyDir": {}} in pod["volumes"]
    assert {"name": "plugins", "mountPath": "/mnt/connect-plugins", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    plain = connect.parse_connect("k", {})
    assert connect.worker_properties(plain, acc)["plugin.path"] == "/opt/kafka/plugins"
    assert "initContainers" not in connect.build_connect("k", "data", plain, acc)[-1]["spec"]["template"]["spec"]
    assert plain.plugin_repository == "https://repo1.maven.org/maven2" and DEFAULT_IMAGE


@pytest.fixture
def repository(tmp_path):
    """A Maven repository on loopback serving ``tmp_path/repo``."""
    root = tmp_path / "repo"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def publish(root, coordinates: str, content: bytes, sha1: str | None = None) -> None:
    path = root / connect_plugins.artifact_path(coordinates)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    path.with_name(path.name + ".sha1").write_text((sha1 or hashlib.sha1(content).hexdigest()) + "\n")


def test_a_jar_is_written_only_when_the_repositorys_checksum_and_the_pinned_one_match(repository, tmp_path):
    root, url = repository
    publish(root, "org.x:good:1", b"good jar")
    publish(root, "org.x:tampered:1", b"changed jar", sha1=hashlib.sha1(b"original jar").hexdigest())
    out = tmp_path / "plugins"

    def fetch(coordinates, sha512=None):
        plugin = connect_plugins.parse_plugins([{"name": "p", "artifacts": [
            {"maven": coordinates, "sha512sum": sha512}]}])
        return connect_plugins.fetch(url, plugin, out)
    assert fetch("org.x:good:1", hashlib.sha512(b"good jar").hexdigest()) == [out / "p" / "good-1.jar"]
    assert (out / "p" / "good-1.jar").read_bytes() == b"good jar"
    with pytest.raises(connect_plugins.FetchError, match="SHA-1"):
        fetch("org.x:tampered:1")
    with pytest.raises(connect_plugins.FetchError, match="SHA-512"):
        fetch("org.x:good:1", hashlib.sha512(b"another jar").hexdigest())
    with pytest.raises(connect_plugins.FetchError, match="404"):
        fetch("org.x:absent:1")
    assert sorted(p.name for p in (out / "p").iterdir()) == ["good-1.jar"]   # nothing else, nothing partial


def test_the_init_container_fetches_a_real_artifact_from_maven_central(tmp_path, monkeypatch, capsys):
    try:
        connect_plugins._get(f"{connect_plugins.MAVEN_CENTRAL}/org/apache/kafka/connect-basic-auth-extension/"
                             "maven-metadata.xml")
    except connect_plugins.FetchError as e:
        tool_missing(f"Maven Central unreachable: {e}")
    monkeypatch.setenv(connect_plugins.PLUGINS_ENV, json.dumps(PLUGINS))
    monkeypatch.delenv(connect_plugins.REPOSITORY_ENV, raising=False)   # Maven Central
    assert connect_plugins.main([str(tmp_path)]) == 0
    jar = tmp_path / "basic-auth" / "connect-basic-auth-extension-3.9.1.jar"
    assert f"fetched {jar}" in capsys.readouterr().out
    with zipfile.ZipFile(jar) as z:   # the REST extension Kafka's ServiceLoader finds
        assert z.read("META-INF/services/org.apache.kafka.connect.rest.ConnectRestExtension").decode().strip() \
            .endswith("BasicAuthSecurityRestExtension")
    monkeypatch.setenv(connect_plugins.PLUGINS_ENV, json.dumps(
        [{"name": "basic-auth", "artifacts": [{"maven": BASIC_AUTH, "sha512sum": "0" * 128}]}]))
    assert connect_plugins.main([str(tmp_path / "pinned")]) == 1
    assert "SHA-512" in capsys.readouterr().err
