"""The OdradekCluster spec model (``odradek.operator.spec``): its defaults are the CRD's, field by
field, so they cannot drift; ``validation.parse_cluster`` fills them in for what a spec leaves out."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from odradek.operator import spec as model
from odradek.operator.validation import parse_cluster

ROOT = Path(__file__).resolve().parents[2]
# CRD field -> the model's attribute where the names differ (camelCase otherwise becomes snake_case)
RENAMED = {"generateCertificateAuthority": "generate", "class": "storage_class", "connect": "external_connect"}


def crd_spec_schema() -> dict:
    crd = yaml.safe_load((ROOT / "crds/odradekclusters.odradek.dev.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def crd_defaults(schema: dict, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """(path, default) of every ``default:`` under ``schema`` (``[]`` in a path: an array's items)."""
    out = [(path, schema["default"])] if "default" in schema else []
    for name, sub in (schema.get("properties") or {}).items():
        out += crd_defaults(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        out += crd_defaults(schema["items"], (*path, "[]"))
    return out


def attribute(name: str) -> str:
    return RENAMED.get(name) or re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def model_value(path: tuple[str, ...]) -> object:
    """The model's value at a CRD path, for a spec that leaves everything out (one listener for
    the listeners' item defaults; tieredStorage with only what it requires)."""
    if path[0] == "listeners":
        listener = parse_cluster({"listeners": [{"name": "a", "port": 9094}]}).listeners[0]
        return getattr(listener, attribute(path[2]))
    value: object = parse_cluster({})
    if path[0] == "tieredStorage":
        value = parse_cluster({"tieredStorage": {"bucket": "segments", "credentialsSecret": {"name": "s"}}})
    for name in path:
        value = getattr(value, attribute(name))
    return value


DEFAULTS = crd_defaults(crd_spec_schema())


def test_the_crd_states_the_defaults_the_model_knows():
    paths = {".".join(p) for p, _ in DEFAULTS}
    assert {"brokers.replicas", "controller.replicas", "gateway.replicas", "zookeeper.managed.replicas",
            "image", "clusterCa.validityDays", "listeners.[].tls", "tieredStorage.taskIntervalMs",
            "tieredStorage.credentialsSecret.accessKeyIdKey"} <= paths


@pytest.mark.parametrize("path, default", DEFAULTS, ids=lambda v: ".".join(v) if isinstance(v, tuple) else None)
def test_model_defaults_are_the_crd_defaults(path, default):
    value = model_value(path)
    if isinstance(default, dict):   # an object defaulted to {} (or {managed: {}}): the model's own defaults
        assert dataclasses.is_dataclass(value), f"{'.'.join(path)}: {value!r}"
        for name in default:
            assert getattr(value, attribute(name)) is not None, f"{'.'.join(path)}.{name}"
    else:
        assert value == default, f"{'.'.join(path)}: the model says {value!r}, the CRD {default!r}"


def test_the_model_is_frozen_and_the_replicas_default_stated_once():
    spec = parse_cluster({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.brokers.replicas = 5  # type: ignore[misc]
    assert spec.brokers.replicas == model.Brokers().replicas == 3
    assert parse_cluster({"brokers": {"replicas": 5}}).brokers.replicas == 5
    operator = ROOT / "operator/odradek/operator"
    restated = [f"{p.name}:{i}" for p in operator.glob("*.py") if p.name != "spec.py"
                for i, line in enumerate(p.read_text().splitlines(), 1)
                if re.search(r"""get\("replicas", *\d""", line)]
    assert not restated, f"replica defaults outside spec.py: {restated}"


def test_managed_zookeeper_unless_external():
    assert parse_cluster({}).zookeeper.managed == model.ManagedZookeeper()
    assert parse_cluster({"zookeeper": {}}).zookeeper.replicas == 3
    external = parse_cluster({"zookeeper": {"external": {"connect": "zk:2181"}}}).zookeeper
    assert external.managed is None and external.external_connect == "zk:2181" and external.replicas == 0
