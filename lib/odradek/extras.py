"""The optional parts of the ``odradek`` package (pyproject's extras) and what each imports, so a
command whose extra is not installed stops with the install line instead of a traceback or a
process that dies at start-up."""

from __future__ import annotations

import importlib.util

# extra -> the top-level modules its packages provide (pyproject.toml's optional-dependencies)
MODULES = {
    "gateway": ("fastapi", "uvicorn", "pyarrow", "prometheus_client", "httpx", "confluent_kafka"),
    "operator": ("kopf", "kubernetes"),
    "rebalance": ("kafka",),
    "spark": ("pyspark", "pyarrow", "httpx"),
    "top": ("rich",),
}


def missing(extra: str) -> list[str]:
    return [m for m in MODULES[extra] if importlib.util.find_spec(m) is None]


def advice(extra: str, what: str, absent: list[str]) -> str:
    return (f"{what} needs the '{extra}' extra, which is not installed (missing: {', '.join(absent)}): "
            f"pip install 'odradek[{extra}]'")


def extra_of(module: str) -> str | None:
    """The extra that provides a top-level module, for an ImportError met at run time."""
    return next((e for e, mods in MODULES.items() if module in mods), None)
