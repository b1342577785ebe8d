"""``odradek groups``: list, describe and reset the offsets of consumer groups.

It speaks the Kafka protocol through librdkafka's admin client (confluent-kafka): ListGroups,
DescribeGroups, OffsetFetch, ListOffsets and OffsetCommit, so it works against Odradek and
Apache Kafka alike. Like Kafka's ``kafka-consumer-groups``, ``reset-offsets`` prints the plan
unless ``--execute`` is given, and refuses a group that still has members (offsets committed
behind an active member's back would be overwritten by its next commit).
"""

from __future__ import annotations

import argparse

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.admin_cli import run, table

TIMEOUT_S = 30


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _offsets(admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=TIMEOUT_S)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def _committed(admin: AdminClient, group: str) -> list[TopicPartition]:
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group].result()
    return [tp for tp in result.topic_partitions if tp.offset >= 0]


def list_groups(admin: AdminClient, args) -> dict:
    result = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result()
    groups = sorted((g.group_id, g.state.name if g.state is not None else "UNKNOWN") for g in result.valid)
    if not args.json:
        print(table([list(g) for g in groups], ["GROUP", "STATE"]))
    return {"groups": [{"group": g, "state": s} for g, s in groups]}


def describe_group(admin: AdminClient, args) -> dict:
    group = args.group
    description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result()
    owner = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else ():
            owner[(tp.topic, tp.partition)] = member
    committed = {(tp.topic, tp.partition): tp.offset for tp in _committed(admin, group)}
    keys = sorted(set(committed) | set(owner))
    ends = _offsets(admin, [TopicPartition(t, p) for t, p in keys], OffsetSpec.latest())
    rows = []
    for topic, partition in keys:
        current, end = committed.get((topic, partition)), ends.get((topic, partition))
        member = owner.get((topic, partition))
        rows.append({"topic": topic, "partition": partition, "current_offset": current, "log_end_offset": end,
                     "lag": end - current if current is not None and end is not None else None,
                     "consumer_id": member.member_id if member else None,
                     "host": member.host if member else None, "client_id": member.client_id if member else None})
    if not args.json:
        print(f"Consumer group '{group}': state {description.state.name}, {len(description.members)} member(s)\n")
        print(table([[group, r["topic"], r["partition"], _dash(r["current_offset"]), _dash(r["log_end_offset"]),
                       _dash(r["lag"]), _dash(r["consumer_id"]), _dash(r["host"]), _dash(r["client_id"])]
                      for r in rows],
                     ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]))
    return {"group": group, "state": description.state.name, "members": len(description.members),
            "partitions": rows}


def _dash(value: object) -> object:
    return "-" if value is None else value


def _targets(admin: AdminClient, args) -> dict[tuple[str, int], int]:
    """The new offset of every partition of the topic (Kafka clamps --to-offset into the log)."""
    metadata = admin.list_topics(args.topic, timeout=TIMEOUT_S).topics.get(args.topic)
    if metadata is None or metadata.error is not None:
        raise SystemExit(f"odradek groups: topic {args.topic!r} not found"
                         + (f" ({metadata.error})" if metadata is not None else ""))
    partitions = [TopicPartition(args.topic, p) for p in sorted(metadata.partitions)]
    earliest = _offsets(admin, partitions, OffsetSpec.earliest())
    latest = _offsets(admin, partitions, OffsetSpec.latest())
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    return {k: min(max(args.to_offset, earliest[k]), latest[k]) for k in latest}


def reset_offsets(admin: AdminClient, args) -> dict:
    group = args.group
    description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result()
    if description.members:
        raise SystemExit(f"odradek groups: group {group!r} has {len(description.members)} active member(s) "
                         f"(state {description.state.name}); stop its consumers before resetting its offsets")
    targets = _targets(admin, args)
    if args.execute:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(targets.items())])]
        result = admin.alter_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group].result()
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise SystemExit(f"odradek groups: could not reset {failed}")
    rows = [[group, t, p, o] for (t, p), o in sorted(targets.items())]
    if not args.json:
        print(table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]))
        if not args.execute:
            print("\n(dry run: add --execute to commit these offsets)")
    return {"group": group, "executed": args.execute,
            "offsets": [{"topic": t, "partition": p, "offset": o} for _, t, p, o in rows]}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek groups", description="consumer groups, through the Kafka protocol")
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="host:port[,host:port...]")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every group and its state")
    describe = sub.add_parser("describe", help="committed offset, log end and lag per partition")
    describe.add_argument("group")
    reset = sub.add_parser("reset-offsets", help="move the group's committed offsets of a topic")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="commit (default: print the plan only)")
    return ap


COMMANDS = {"list": list_groups, "describe": describe_group, "reset-offsets": reset_offsets}


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run("odradek groups", COMMANDS, args, _admin(args.bootstrap_server))
