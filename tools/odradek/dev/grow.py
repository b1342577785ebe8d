"""Adding a broker the dev cluster never had (``odradek dev start N`` for a new N): its command
is an existing broker's with the new id, its own data directory, any free ports and no rack
(``--rack`` follows it when given), then recorded like the brokers ``up`` started, so that
``status``, ``kill``, ``start`` and ``down`` know it. It joins empty: ``odradek rebalance
--add-brokers N`` gives it its share (docs/rebalancing.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from odradek import metrics_http

_PORT_CONFIGS = re.compile(r"^(metrics\.port=|listeners=.*:)\d+$")


def new_broker_command(state: dict, broker_id: int, rack: str | None = None,
                       bound: dict[str, int] | None = None) -> list[str]:
    """An existing broker's command rewritten for ``broker_id`` on ``bound``'s ports (0: any)."""
    template = next((cmd for name, cmd in sorted(state["commands"].items()) if name.startswith("broker-")), None)
    if template is None:
        raise SystemExit("the dev cluster has no broker to copy a command from")
    bound = bound or {}
    out: list[str] = []
    args = iter(template)
    for arg in args:
        if arg in ("--id", "--data-dir", "--listen", "--rack"):
            value = next(args)
            if arg == "--id":
                out += [arg, str(broker_id)]
            elif arg == "--data-dir":
                out += [arg, str(Path(state["data_dir"]) / f"broker-{broker_id}")]
            elif arg == "--listen":
                out += [arg, f"{value.rsplit(':', 1)[0]}:{bound.get('kafka', 0)}"]
            continue
        if _PORT_CONFIGS.match(arg):
            port = bound.get("metrics" if arg.startswith("metrics.") else "kafka", 0)
            arg = re.sub(r"\d+$", str(port), arg)
        out.append(arg)
    return out + (["--rack", rack] if rack else [])


def record(state: dict, broker_id: int, rack: str | None, bound: dict[str, int]) -> None:
    """The new broker's addresses in the state, its command with the ports it bound."""
    name = f"broker-{broker_id}"
    state["commands"][name] = new_broker_command(state, broker_id, rack, bound)
    state["brokers"][str(broker_id)] = f"127.0.0.1:{bound['kafka']}"
    if "metrics" in bound:
        state.setdefault("metrics", {})[name] = metrics_http.url("127.0.0.1", bound["metrics"])
