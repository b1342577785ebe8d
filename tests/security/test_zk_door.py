"""ZooKeeper behind one door: in the broker, only ``odradek.broker.zk`` imports kazoo; every
other part reaches ZooKeeper through the ports it builds (``Znodes``, ``EntityConfigs``) and
the stores written over them."""

from __future__ import annotations

import ast
from pathlib import Path

import odradek.broker

BROKER = Path(odradek.broker.__file__).parent
DOOR = BROKER / "zk"


def _imports_kazoo(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "kazoo" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kazoo":
            return True
    return False


def test_only_the_zk_package_imports_kazoo():
    importers = {p.relative_to(BROKER).as_posix() for p in BROKER.rglob("*.py") if _imports_kazoo(p)}
    assert importers and all(p.startswith("zk/") for p in importers), sorted(importers)


def test_no_handler_or_context_holds_a_client():
    for path in [BROKER / "context.py", *(BROKER / "handlers").glob("*.py")]:
        text = path.read_text()
        assert "KazooClient" not in text and "ctx.zk" not in text, path
