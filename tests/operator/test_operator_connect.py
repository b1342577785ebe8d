"""OdradekConnect's pure builders (``connect``) and OdradekConnector's REST plan and client
(``connectors``, against ``connect_fake``): no API server, no JVM."""

from __future__ import annotations

import base64
import dataclasses
import logging
from pathlib import Path

import kopf
import pytest
import yaml

from odradek.operator import connect, connectors
from odradek.operator.settings import OperatorSettings
from odradek.operator.spec import ConnectorSpec, ConnectSpec, SpecError
from tests.operator.connect_fake import FakeConnect
from tests.operator.plans import cluster_spec
from tests.operator.test_operator_spec import crd_defaults

ROOT = Path(__file__).resolve().parents[2]
SECURED = {"listeners": [{"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "scram-sha-512"}},
                         {"name": "ext", "port": 9094, "type": "nodeport", "tls": True,
                          "authentication": {"type": "tls"}}],
           "authorization": {"type": "simple"}}
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def schema(crd: str) -> dict:
    doc = yaml.safe_load((ROOT / "crds" / crd).read_text())
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


@pytest.mark.parametrize("crd, model, parsed", [
    ("odradekconnects.odradek.dev.yaml", ConnectSpec, connect.parse_connect("k", {})),
    ("odradekconnectors.odradek.dev.yaml", ConnectorSpec, connectors.parse_connector({"class": FILE_SOURCE}))])
def test_the_crds_defaults_are_the_models(crd, model, parsed):
    defaults = crd_defaults(schema(crd))
    assert defaults, crd
    fields = {f.name for f in dataclasses.fields(model)}
    for path, value in defaults:
        attr = {("exactlyOnceSourceSupport",): "exactly_once_source_support", ("tasksMax",): "tasks_max",
                ("jvmHeap",): "jvm_heap", ("pluginRepository",): "plugin_repository",
                ("restApi", "authentication", "type"): "rest_authentication"}.get(path, path[0])
        assert attr in fields and getattr(parsed, attr) == value, (crd, path)


def access(raw=None, listener=None):
    spec = connect.parse_connect("k", {"listener": listener} if listener else {})
    return spec, connect.cluster_access("c", "data", cluster_spec(raw or {}), spec)


def test_an_open_cluster_gets_plain_workers_without_a_user():
    spec, acc = access()
    props = connect.worker_properties(spec, acc)
    assert props["bootstrap.servers"] == "c-bootstrap.data.svc:9092"
    assert (props["group.id"], props["config.storage.topic"], props["offset.storage.topic"],
            props["status.storage.topic"]) == ("k", "k-configs", "k-offsets", "k-status")
    assert props["offset.storage.partitions"] == "25" and props["status.storage.partitions"] == "5"
    # Kafka's default 3 (the cluster has 3 brokers), not -1: its default.replication.factor may be 1
    assert {props[k] for k in connect.STORAGE_FACTOR_KEYS.values()} == {"3"}
    assert props["exactly.once.source.support"] == "disabled"
    assert not any(k.endswith(("security.protocol", "sasl.jaas.config")) for k in props)
    assert connect.build_user("k", "data", spec, acc) == []


def test_a_secured_cluster_gets_tls_scram_workers_reading_their_secret_through_a_config_provider():
    spec, acc = access(SECURED)
    assert acc.listener.name == "tls" and acc.bootstrap == "c-bootstrap.data.svc:9092"   # the internal one
    props = connect.worker_properties(spec, acc)
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[prefix + "security.protocol"] == "SASL_SSL"
        assert props[prefix + "sasl.mechanism"] == "SCRAM-SHA-512"
        assert props[prefix + "sasl.jaas.config"] == "${dir:/etc/odradek/connect/user:sasl.jaas.config}"
        assert props[prefix + "ssl.truststore.location"] == "/etc/odradek/connect/cluster-ca/ca.crt"
    assert props["config.providers.dir.class"] == "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
    text = connect.properties_text(props)
    assert "password" not in text.lower().replace("sasl.jaas.config", "")
    objects = connect.build_connect("k", "data", spec, acc)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"c-cluster-ca-cert", "k-connect"}
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    with pytest.raises(SpecError, match="no internal listener"):
        access(SECURED, listener="ext")


def test_the_workers_user_has_least_privilege():
    spec = connect.parse_connect("k", {"groupId": "g", "exactlyOnceSourceSupport": "enabled", "authorization": {
        "acls": [{"resource": {"type": "topic", "name": "lines"}, "operations": ["Write", "Describe"]}]}})
    acc = connect.cluster_access("c", "data", cluster_spec(SECURED), spec)
    (user,) = connect.build_user("k", "data", spec, acc)
    assert user["metadata"]["name"] == "k-connect" and user["spec"]["authentication"] == {"type": "scram-sha-512"}
    acls = {(a["resource"]["type"], a["resource"].get("name"), a["resource"].get("patternType", "literal")):
            a["operations"] for a in user["spec"]["authorization"]["acls"]}
    ops = ["Read", "Write", "Describe", "Create", "DescribeConfigs"]
    assert acls == {("group", "g", "literal"): ["Read", "Describe"], ("topic", "g-configs", "literal"): ops,
                    ("topic", "g-offsets", "literal"): ops, ("topic", "g-status", "literal"): ops,
                    ("transactionalId", "connect-cluster-g", "literal"): ["Write", "Describe"],
                    ("transactionalId", "g-", "prefix"): ["Write", "Describe"],
                    ("topic", "lines", "literal"): ["Write", "Describe"]}
    plain = connect.user_acls(dataclasses.replace(spec, exactly_once_source_support="disabled", acls=()))
    assert {a["resource"]["type"] for a in plain} == {"group", "topic"}   # no transactions without EOS


def test_storage_topics_are_compacted_with_kafkas_partition_counts_and_adoptable():
    spec, acc = access()
    topics = connect.build_topics("k", "data", spec, acc)
    assert [(t["metadata"]["name"], t["spec"]["topicName"], t["spec"]["partitions"], t["spec"]["replicas"])
            for t in topics] == [("k-connect-configs", "k-configs", 1, 3), ("k-connect-offsets", "k-offsets", 25, 3),
                                 ("k-connect-status", "k-status", 5, 3)]
    assert all(t["spec"]["config"] == {"cleanup.policy": "compact"} for t in topics)
    assert all(t["metadata"]["annotations"] == {"odradek.dev/adopt": "true"} for t in topics)


def test_storage_replication_is_kafkas_3_capped_at_the_brokers_unless_the_user_sets_it():
    def factors(brokers, config=None):
        spec = connect.parse_connect("k", {"config": config or {}})
        acc = connect.cluster_access("c", "data", cluster_spec({"brokers": {"replicas": brokers}}), spec)
        props = connect.worker_properties(spec, acc)
        topics = {t["spec"]["topicName"]: t["spec"].get("replicas") for t in connect.build_topics("k", "data", spec, acc)}
        return ([props[k] for k in connect.STORAGE_FACTOR_KEYS.values()],
                [topics[n] for n in ("k-configs", "k-offsets", "k-status")])
    assert factors(5) == (["3", "3", "3"], [3, 3, 3])
    assert factors(2) == (["2", "2", "2"], [2, 2, 2])
    assert factors(1) == (["1", "1", "1"], [1, 1, 1])
    # the user's, in both the worker and the OdradekTopic; -1 (the brokers' default) leaves replicas out
    assert factors(5, {"offset.storage.replication.factor": 5, "status.storage.replication.factor": -1}) == (
        ["3", "5", "-1"], [3, 5, None])
    for bad in (0, -2, "three"):
        with pytest.raises(SpecError, match="config.storage.replication.factor"):
            connect.parse_connect("k", {"config": {"config.storage.replication.factor": bad}})


def test_a_config_change_rolls_the_workers_and_owned_keys_are_refused():
    def digest(config):
        spec = connect.parse_connect("k", {"config": config})
        acc = connect.cluster_access("c", "data", cluster_spec({}), spec)
        dep = connect.build_connect("k", "data", spec, acc)[-1]
        return dep["spec"]["template"]["metadata"]["annotations"][connect.CONFIG_HASH_ANNOTATION]
    assert digest({"offset.flush.interval.ms": 1000}) != digest({"offset.flush.interval.ms": 2000})
    for key in ("bootstrap.servers", "producer.sasl.jaas.config", "ssl.truststore.location", "rest.port",
                "group.id", "config.providers"):
        with pytest.raises(SpecError, match="set by the operator"):
            connect.parse_connect("k", {"config": {key: "x"}})


# -- OdradekConnector ------------------------------------------------------------------------

def spec_of(**kw):
    return connectors.parse_connector({"class": FILE_SOURCE, "config": {"file": "/tmp/in", "topic": "lines"}, **kw})


def test_the_plan_creates_updates_and_brings_the_state():
    new = connectors.plan("src", spec_of(), None, None, {})
    assert [(c.method, c.path) for c in new] == [("PUT", "/connectors/src/config")]
    assert new[0].body == {"connector.class": FILE_SOURCE, "tasks.max": "1", "name": "src", "file": "/tmp/in",
                           "topic": "lines"}
    running = {"connector": {"state": "RUNNING"}, "tasks": []}
    assert connectors.plan("src", spec_of(), new[0].body, running, {}) == []
    assert [c.path for c in connectors.plan("src", spec_of(state="stopped"), new[0].body, running, {})] == [
        "/connectors/src/stop"]
    assert [c.path for c in connectors.plan("src", spec_of(state="paused"), None, None, {})] == [
        "/connectors/src/config", "/connectors/src/pause"]   # created, then paused at once
    assert [c.path for c in connectors.plan("src", spec_of(tasksMax=2), new[0].body,
                                            {"connector": {"state": "PAUSED"}}, {})] == [
        "/connectors/src/config", "/connectors/src/resume"]
    calls = connectors.plan("src", spec_of(), new[0].body, running,
                            {"odradek.dev/restart": "failed", "odradek.dev/restart-task": "0"})
    assert [c.path for c in calls] == ["/connectors/src/restart?includeTasks=true&onlyFailed=true",
                                       "/connectors/src/tasks/0/restart"]
    assert [connectors.restart_annotation(c) for c in calls] == ["odradek.dev/restart", "odradek.dev/restart-task"]
    with pytest.raises(SpecError, match="come from spec.class"):
        connectors.parse_connector({"class": FILE_SOURCE, "config": {"tasks.max": 3}})


class ConnectorApi:
    """The API server as ``sync_connector`` sees it: the OdradekConnect (its REST API at ``url``)
    and the connector's annotations as stored, which ``remove_annotation_if`` tests as a JSON patch."""

    def __init__(self, url: str, annotations: dict) -> None:
        self.connect = {"metadata": {"name": "k", "namespace": "ns", "annotations": {"odradek.dev/connect-url": url}}}
        self.annotations = dict(annotations)

    def get(self, api_version, kind, namespace, name):
        return self.connect if (kind, name) == ("OdradekConnect", "k") else None

    def remove_annotation_if(self, api_version, kind, namespace, name, key, value):
        if self.annotations.get(key) != value:
            return False   # the test op failed
        del self.annotations[key]
        return True

    def merge_patch(self, api_version, kind, namespace, name, patch):
        self.annotations.update(patch["metadata"]["annotations"])


def test_a_restart_annotation_is_removed_only_while_it_still_says_what_the_pass_read():
    """A pass claims a restart by removing its annotation under a JSON patch's test on the value it
    read, before the POST: a stale pass (a body read before the user asked ``failed``), or a second
    pass holding the same body, restarts nothing and leaves the annotation; a failed restart gives
    it back for the next pass."""
    from odradek.operator import connect_run

    fake = FakeConnect()
    try:
        settings = OperatorSettings(trusted_controller_urls=(fake.url,))

        def run(api, read):   # one pass on a body whose annotations are ``read``
            body = {"metadata": {"name": "src", "namespace": "ns", "annotations": read},
                    "spec": {"class": FILE_SOURCE, "connect": "k", "config": {"topic": "lines"}}}
            return connect_run.sync_connector(api, body, settings, logging.getLogger("test"))

        api = ConnectorApi(fake.url, {"odradek.dev/restart": "failed"})   # the user asked again
        assert run(api, {})[1][0]
        run(api, {"odradek.dev/restart": "true"})                          # the stale body
        assert ("POST", "restart") not in fake.calls and api.annotations == {"odradek.dev/restart": "failed"}
        run(api, {"odradek.dev/restart": "failed"})
        run(api, {"odradek.dev/restart": "failed"})                        # a second pass, same body
        assert fake.calls.count(("POST", "restart")) == 1 and api.annotations == {}

        api.annotations = {"odradek.dev/restart-task": "0"}
        fake.restart_error = 500
        with pytest.raises(connect_run.Waiting, match="restart failed"):
            run(api, {"odradek.dev/restart-task": "0"})
        assert api.annotations == {"odradek.dev/restart-task": "0"}, "given back"
        fake.restart_error = None
        run(api, {"odradek.dev/restart-task": "0"})
        assert fake.calls.count(("POST", "tasks/0/restart")) == 2 and api.annotations == {}
    finally:
        fake.close()


def test_the_verdict_names_failed_tasks():
    spec = spec_of()
    assert connectors.verdict(spec, {"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]})[0]
    trace = "org.apache.kafka.connect.errors.ConnectException: x\n\tat"
    failed = {"connector": {"state": "RUNNING"}, "tasks": [{"id": 1, "state": "FAILED", "trace": trace}]}
    assert connectors.verdict(spec, failed) == (
        False, "ConnectorFailed", "tasks 1 failed: org.apache.kafka.connect.errors.ConnectException: x")
    assert connectors.verdict(spec_of(state="paused"), {"connector": {"state": "RUNNING"}})[1] == "ConnectorNotInState"
    assert connectors.verdict(spec, None)[1] == "ConnectorNotFound"


def test_the_client_runs_a_plan_against_the_rest_api():
    fake = FakeConnect()
    try:
        client = connectors.ConnectClient(fake.url)
        spec = spec_of(state="stopped")
        for call in connectors.plan("src", spec, client.config("src"), client.status("src"), {}):
            client.call(call.method, call.path, call.body)
        assert client.status("src")["connector"]["state"] == "STOPPED"
        assert connectors.verdict(spec, client.status("src"))[0]
        assert connectors.plan("src", spec, client.config("src"), client.status("src"), {}) == []
        with pytest.raises(connectors.ConnectError) as refused:
            client.call("PUT", "/connectors/bad/config", {"connector.class": "no.Such", "tasks.max": "1"})
        assert refused.value.status == 400 and not refused.value.retriable
        assert "Class could not be found" in refused.value.message
        assert client.delete("src") and not client.delete("src")
    finally:
        fake.close()
    with pytest.raises(connectors.ConnectUnreachable):
        connectors.ConnectClient(fake.url, timeout=2).status("src")


def test_basic_authentication_puts_kafkas_extension_its_jaas_file_and_the_login_secret_on_the_workers():
    spec = connect.parse_connect("k", {"restApi": {"authentication": {"type": "basic"}}})
    acc = connect.cluster_access("c", "data", cluster_spec({}), spec)
    assert connect.worker_properties(spec, acc)["rest.extension.classes"] == connect.BASIC_AUTH_EXTENSION
    objects = {(o["kind"], o["metadata"]["name"]): o for o in connect.build_connect("k", "data", spec, acc, "pw")}
    secret = objects[("Secret", "k-connect-rest")]
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {"username": "odradek-operator", "password": "pw", "users.properties": "odradek-operator=pw\n"}
    jaas = objects[("ConfigMap", "k-connect-config")]["data"]["rest-jaas.conf"]
    assert "PropertyFileLoginModule required" in jaas
    assert 'file="/etc/odradek/connect/rest-users/users.properties"' in jaas
    assert "pw" not in jaas
    pod = objects[("Deployment", "k-connect")]["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    jaas_option = "-Djava.security.auth.login.config=/etc/odradek/connect/worker/rest-jaas.conf"
    assert {"name": "KAFKA_OPTS", "value": jaas_option} in worker["env"]
    mount = {"name": "rest-users", "mountPath": "/etc/odradek/connect/rest-users", "readOnly": True}
    assert mount in worker["volumeMounts"]
    assert {"name": "rest-users", "secret": {"secretName": "k-connect-rest"}} in pod["volumes"]
    assert worker["readinessProbe"]["tcpSocket"] == {"port": 8083}   # every HTTP path would answer 401
    with pytest.raises(ValueError):
        connect.build_connect("k", "data", spec, acc)
    with pytest.raises(SpecError, match="restApi.authentication.type"):
        connect.parse_connect("k", {"restApi": {"authentication": {"type": "oauth"}}})
    open_spec = connect.parse_connect("k", {})
    assert "rest.extension.classes" not in connect.worker_properties(open_spec, acc)
    assert not any(o["kind"] == "Secret" for o in connect.build_connect("k", "data", open_spec, acc))


def test_the_client_logs_in_where_the_rest_api_asks_and_a_refused_login_is_retried():
    fake = FakeConnect(credentials=("odradek-operator", "pw"))
    try:
        with pytest.raises(connectors.ConnectError) as refused:
            connectors.ConnectClient(fake.url).status("src")
        assert refused.value.status == 401 and refused.value.retriable
        client = connectors.ConnectClient(fake.url, credentials=("odradek-operator", "pw"))
        assert client.status("src") is None
        client.call("PUT", "/connectors/src/config", connectors.desired_config("src", spec_of()))
        assert client.status("src")["connector"]["state"] == "RUNNING"
    finally:
        fake.close()
