"""The CRDs in crds/: structural, every field described (``kubectl explain``), short names,
printer columns, status subresource; the chart's copies are identical."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def walk(schema: dict, path: str = ""):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


KEYWORDS = {"type", "description", "properties", "items", "additionalProperties", "required", "default", "enum",
            "minimum", "maximum", "maxLength", "pattern", "format", "nullable"}


def test_seven_crds():
    assert [p.name for p in CRDS] == ["odradekclusters.odradek.dev.yaml", "odradekconnectors.odradek.dev.yaml",
                                      "odradekconnects.odradek.dev.yaml", "odradekmirrormaker2s.odradek.dev.yaml",
                                      "odradekrebalances.odradek.dev.yaml",
                                      "odradektopics.odradek.dev.yaml", "odradekusers.odradek.dev.yaml"]


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_crd_shape(path):
    crd = load(path)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.odradek.dev"
    assert spec["group"] == "odradek.dev" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] in (["odc"], ["odt"], ["odu"], ["odr"], ["odcn"], ["odctr"], ["odmm2"])
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"] for c in version["additionalPrinterColumns"]}
    assert {"Ready", "Age"} <= columns
    root = version["schema"]["openAPIV3Schema"]
    undocumented = []
    for where, node in walk(root):
        unknown = [k for k in node if k not in KEYWORDS and not k.startswith("x-kubernetes-")]
        assert not unknown, f"{path.name}{where}: unknown schema keys {unknown} (a YAML flow mapping split?)"
        if where in (".metadata",) or where.endswith("{}"):
            continue
        # structural: every node has a type (or is int-or-string / preserve-unknown-fields)
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path.name}{where}: no type"
        if where and not where.endswith("[]") and "description" not in node:
            undocumented.append(where)
    assert not undocumented, f"{path.name}: fields without description: {undocumented}"


def test_chart_crds_equal_root_crds():
    chart = sorted((ROOT / "charts" / "odradek" / "crds").glob("*.yaml"))
    assert [p.name for p in chart] == [p.name for p in CRDS]
    for mine, theirs in zip(CRDS, chart):
        assert mine.read_bytes() == theirs.read_bytes(), f"charts/odradek/crds/{theirs.name} differs from crds/"
