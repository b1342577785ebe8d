"""The Dockerfile cannot be built here (no engine); check what can be checked by reading it:
the install is uv's frozen sync of the lock, every folder the wheel is built from is copied,
the entrypoint is `odradek`, the user is not root, the base image is a build argument."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dockerfile_matches_the_project_layout():
    text = (ROOT / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = set(re.findall(r"^COPY (\S+)/ ", text, re.M))
    assert {p.split("/")[0] if p.startswith("lib") else "/".join(p.split("/")[:1]) for p in packages} <= copied, \
        f"the image must copy every wheel folder: {packages} vs COPY {sorted(copied)}"
    assert re.search(r"^ARG BASE_IMAGE=", text, re.M) and "FROM ${BASE_IMAGE}" in text
    assert re.search(r"uv sync --frozen .*--extra operator --extra gateway --no-editable", text)
    # every part the image runs imports in the build (not the Spark data source: odradek.spark
    # imports pyspark, which runs from Spark's image; e2e/ builds and runs this image for real)
    for module in ("broker.server", "controller.service", "operator.handlers", "gateway.app", "client"):
        assert f"odradek.{module}" in text
    assert 'ENTRYPOINT ["odradek"]' in text
    assert re.search(r"^USER 10001", text, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not {p.split("/")[0] for p in packages} & set(ignored)
