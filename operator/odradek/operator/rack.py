"""``odradek operator rack``: the brokers' init container writes its node's rack to a file.

Kubernetes has no downward API for node labels, so (as Strimzi does) an init container reads
its Node through the API server — as the ``<cluster>-brokers`` ServiceAccount, which the
operator binds to the chart's ``nodes get`` ClusterRole only for clusters that set
``spec.rack.topologyKey`` — and writes the label's value where the broker's ``--rack-file``
reads it. A node without the label is an error (the pod does not start, its log says which
label on which node): Kafka's rack-aware replica placement refuses clusters where only some
brokers have a rack.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class RackError(Exception):
    pass


def node_rack(kube, node: str, topology_key: str) -> str:
    found = kube.get("v1", "Node", None, node)
    if found is None:
        raise RackError(f"node {node!r} not found")
    value = ((found.get("metadata") or {}).get("labels") or {}).get(topology_key)
    if not value:
        raise RackError(f"node {node!r} has no label {topology_key!r} (spec.rack.topologyKey)")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="odradek operator rack",
                                description="Write this pod's node's rack (a node label) to a file.")
    p.add_argument("--node", required=True, help="the node's name (downward API spec.nodeName)")
    p.add_argument("--topology-key", required=True, help="the node label holding the rack")
    p.add_argument("--output", type=Path, required=True, help="file the broker reads with --rack-file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from odradek.operator.kube import Kube
    try:
        rack = node_rack(Kube(), args.node, args.topology_key)
    except RackError as e:
        print(f"odradek operator rack: {e}", file=sys.stderr)
        return 1
    args.output.write_text(rack)
    print(f"broker.rack={rack} (node {args.node}, label {args.topology_key})")
    return 0
