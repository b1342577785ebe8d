"""OdradekConnect's ``spec.plugins``: connector plugins by Maven coordinates (as Strimzi's
``build.plugins`` artifacts), fetched when a worker pod starts into a volume on its ``plugin.path``.

Pure part: the spec checked (``parse_plugins``: names and coordinates safe as path segments), an
artifact's place in a Maven repository (``artifact_path``), the init container and the volume the
Deployment gets (``init_container``, ``VOLUME``). The init container runs the Odradek image
(``python -m odradek.operator.connect_plugins``), not the Connect image: Apache Kafka's
distribution has no HTTP client to fetch with.

I/O part (``fetch``): each artifact is downloaded to ``<dir>/<plugin>/<artifact>-<version>.jar``
and checked against the repository's ``.sha1`` (Maven Central publishes one for every file) and,
when the spec pins one, its SHA-512 (``sha512sum``: a repository that serves a changed jar with
a matching ``.sha1`` is caught only so). A jar is written under a temporary name and renamed,
so a worker never sees half of one. Only the artifacts named: no transitive dependencies (name
each jar a plugin needs, as Strimzi's ``jar`` artifacts).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from odradek.operator.spec import MAVEN_CENTRAL, ConnectPlugin, SpecError

PLUGINS_DIR = "/mnt/connect-plugins"      # the init volume, on the workers' plugin.path
PLUGINS_ENV = "ODRADEK_CONNECT_PLUGINS"   # JSON: [{"name", "artifacts": [{"maven", "sha512sum"}]}]
REPOSITORY_ENV = "ODRADEK_CONNECT_PLUGIN_REPOSITORY"
VOLUME = {"name": "plugins", "emptyDir": {}}
TIMEOUT_S = 60.0
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")   # no "/", never "." or ".."
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_SHA512 = re.compile(r"[0-9a-f]{128}")


def parse_coordinates(text: str) -> tuple[str, str, str]:
    """``group:artifact:version`` (each part a safe path segment); ``SpecError`` otherwise."""
    parts = str(text).split(":")
    if len(parts) != 3 or not all(_SEGMENT.fullmatch(p) for p in parts):
        raise SpecError(f"{text!r} is not group:artifact:version")
    return parts[0], parts[1], parts[2]


def parse_plugins(raw: Sequence[Mapping[str, Any]] | None) -> tuple[ConnectPlugin, ...]:
    out, seen = [], set()
    for i, plugin in enumerate(raw or ()):
        where, name = f"spec.plugins[{i}]", str(plugin.get("name") or "")
        if not _NAME.fullmatch(name) or name in seen:
            raise SpecError(f"{where}.name: {name!r} must be a unique lower-case name (a directory of plugin.path)")
        seen.add(name)
        artifacts = []
        for j, artifact in enumerate(plugin.get("artifacts") or ()):
            try:
                parse_coordinates(artifact.get("maven", ""))
            except SpecError as e:
                raise SpecError(f"{where}.artifacts[{j}].maven: {e}") from None
            digest = artifact.get("sha512sum")
            if digest is not None and not _SHA512.fullmatch(str(digest).lower()):
                raise SpecError(f"{where}.artifacts[{j}].sha512sum: not a SHA-512 in hex")
            artifacts.append((str(artifact["maven"]), str(digest).lower() if digest else None))
        if not artifacts:
            raise SpecError(f"{where}.artifacts: name at least one")
        out.append(ConnectPlugin(name, tuple(artifacts)))
    return tuple(out)


def parse_repository(url: str | None) -> str:
    url = (url or MAVEN_CENTRAL).rstrip("/")
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise SpecError(f"spec.pluginRepository: {url!r} is not an http(s) URL")
    return url


def artifact_path(coordinates: str) -> str:
    """The jar's path in a Maven repository (Maven's layout: the group's dots are directories)."""
    group, artifact, version = parse_coordinates(coordinates)
    return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


def plugins_json(plugins: Sequence[ConnectPlugin]) -> str:
    return json.dumps([{"name": p.name, "artifacts": [{"maven": c, "sha512sum": d} for c, d in p.artifacts]}
                       for p in plugins], sort_keys=True, separators=(",", ":"))


def init_container(plugins: Sequence[ConnectPlugin], repository: str, image: str) -> dict:
    """The init container that fills the plugins volume (mounted at ``PLUGINS_DIR``)."""
    return {"name": "plugins", "image": image,
            "command": ["python", "-m", "odradek.operator.connect_plugins", PLUGINS_DIR],
            "env": [{"name": PLUGINS_ENV, "value": plugins_json(plugins)},
                    {"name": REPOSITORY_ENV, "value": repository}],
            "volumeMounts": [{"name": VOLUME["name"], "mountPath": PLUGINS_DIR}]}


# -- I/O: the download ------------------------------------------------------------------------

class FetchError(Exception):
    """An artifact could not be fetched, or its content is not what its checksum says."""


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return response.read()
    except OSError as e:   # URLError and HTTPError are OSErrors
        raise FetchError(f"{url}: {e}") from None


def fetch_artifact(repository: str, coordinates: str, sha512sum: str | None, directory: Path) -> Path:
    url = f"{repository.rstrip('/')}/{artifact_path(coordinates)}"
    jar = _get(url)
    published = _get(url + ".sha1").decode(errors="replace").split()
    if not published or hashlib.sha1(jar).hexdigest() != published[0].lower():
        raise FetchError(f"{url}: its SHA-1 is not the repository's ({url}.sha1)")
    if sha512sum is not None and hashlib.sha512(jar).hexdigest() != sha512sum:
        raise FetchError(f"{url}: its SHA-512 is not spec.plugins' sha512sum")
    target = directory / url.rsplit("/", 1)[1]
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(jar)
    partial.rename(target)
    return target


def fetch(repository: str, plugins: Sequence[ConnectPlugin], root: Path) -> list[Path]:
    """Every plugin's artifacts into ``root/<plugin>/``; the jars written."""
    out = []
    for plugin in plugins:
        directory = root / plugin.name
        directory.mkdir(parents=True, exist_ok=True)
        out += [fetch_artifact(repository, c, digest, directory) for c, digest in plugin.artifacts]
    return out


def main(argv: Sequence[str]) -> int:
    """The init container: ``python -m odradek.operator.connect_plugins DIR``."""
    if len(argv) != 1:
        print("usage: python -m odradek.operator.connect_plugins DIR", file=sys.stderr)
        return 2
    try:
        plugins = parse_plugins(json.loads(os.environ.get(PLUGINS_ENV) or "[]"))
        for jar in fetch(parse_repository(os.environ.get(REPOSITORY_ENV)), plugins, Path(argv[0])):
            print(f"fetched {jar}")
    except (SpecError, FetchError, ValueError) as e:
        print(f"connect plugins: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
