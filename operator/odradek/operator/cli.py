"""``odradek operator``: run the kopf operator (the handlers in ``odradek.operator.handlers``)."""

from __future__ import annotations

import argparse

from odradek import logs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from odradek.operator import ha
    p = argparse.ArgumentParser(prog="odradek operator",
                                description="Run the Odradek Kubernetes operator (OdradekCluster, OdradekTopic).")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", default=[],
                       help="watch this namespace (repeatable; glob patterns allowed)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (default)")
    p.add_argument("--liveness", metavar="URL", default=None,
                   help="serve a liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-port", type=int, default=-1, metavar="PORT",
                   help="serve Prometheus metrics (reconcile counts and durations) at PORT/metrics; "
                        "-1: none (default; the chart uses 9404)")
    p.add_argument("--metrics-host", default="0.0.0.0", help="the address --metrics-port binds (default 0.0.0.0)")
    p.add_argument("--selector", default="", metavar="LABELS",
                   help="handle only the Odradek resources matching this label selector (Strimzi's "
                        "STRIMZI_CUSTOM_RESOURCE_SELECTOR), e.g. 'odradek.dev/operator=blue' or '!odradek.dev/operator'")
    ha.add_arguments(p)
    logs.add_arguments(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "rack":  # the brokers' init container (odradek.operator.rack)
        from odradek.operator.rack import main as rack
        return rack(argv[1:])
    if argv and argv[0] == "advertise":  # the brokers' init container for external listeners
        from odradek.operator.listeners import main as advertise
        return advertise(argv[1:])
    if argv and argv[0] == "probe":  # readiness probes of mutual-TLS control planes (odradek.operator.probe)
        from odradek.operator.probe import main as probe
        return probe(argv[1:])
    args = parse_args(argv)
    logs.configure("operator", args.log_level, args.log_format)
    import kopf

    from odradek.operator import evictions, ha, handlers, metrics
    from odradek.operator.settings import OperatorSettings

    # The environment, read once; kopf's default registry also holds its own login handlers.
    registry = kopf.get_default_registry()
    own = OperatorSettings.from_env()
    handlers.register(registry, own)
    if args.selector:   # server-side: the watches of every odradek.dev kind carry it
        @kopf.on.startup(registry=registry)
        def select(settings: kopf.OperatorSettings, **_: object) -> None:
            settings.watching.label_selectors["odradek.dev", kopf.EVERYTHING] = args.selector
    elector = ha.elector(args) if args.leader_elect else None
    ha.register_probe(registry, elector)
    # Every replica, standby or leader, answers the eviction webhook (the Service selects them all).
    evictions.start(own, tuple(args.namespace))
    if args.metrics_port >= 0:
        metrics.serve(args.metrics_host, args.metrics_port)

    # Standalone (no KopfPeering objects): one replica, or the holder of the Lease (odradek.operator.ha).
    def run() -> None:
        kopf.run(standalone=True, clusterwide=not args.namespace, namespaces=args.namespace,
                 liveness_endpoint=args.liveness)
    return ha.run_elected(elector, args.liveness, run)
