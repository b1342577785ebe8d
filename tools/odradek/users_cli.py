"""``odradek users list|add|remove``: SCRAM users, through the Kafka protocol.

DescribeUserScramCredentials and AlterUserScramCredentials through librdkafka's admin client
(confluent-kafka), so it works against Odradek and Apache Kafka alike (Kafka's own tool for
this is ``kafka-configs --entity-type users``). The client sends a salted password, never the
password. The cluster: ``--bootstrap-server`` with ``--command-config`` (Kafka client
properties), or a dev cluster's ``--data-dir`` (its admin credentials).
"""

from __future__ import annotations

import argparse

from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from odradek.admin_cli import run, table
from odradek.dev import access

TIMEOUT_S = 30
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def list_users(admin: AdminClient, args) -> dict:
    described = admin.describe_user_scram_credentials(request_timeout=TIMEOUT_S).result()
    users = [{"user": user, "mechanism": info.mechanism.name.replace("_", "-"), "iterations": info.iterations}
             for user, d in sorted(described.items()) for info in d.scram_credential_infos]
    if not args.json:
        print(table([[u["user"], u["mechanism"], u["iterations"]] for u in users], ["USER", "MECHANISM", "ITERATIONS"]))
    return {"users": users}


def _alter(admin: AdminClient, alteration) -> None:
    for future in admin.alter_user_scram_credentials([alteration], request_timeout=TIMEOUT_S).values():
        future.result()


def add_user(admin: AdminClient, args) -> dict:
    info = ScramCredentialInfo(MECHANISMS[args.mechanism], args.iterations)
    _alter(admin, UserScramCredentialUpsertion(args.user, info, args.password.encode()))
    if not args.json:
        print(f"user {args.user!r} has a {args.mechanism} credential ({args.iterations} iterations)")
    return {"user": args.user, "mechanism": args.mechanism, "iterations": args.iterations}


def remove_user(admin: AdminClient, args) -> dict:
    _alter(admin, UserScramCredentialDeletion(args.user, MECHANISMS[args.mechanism]))
    if not args.json:
        print(f"user {args.user!r}: {args.mechanism} credential removed")
    return {"user": args.user, "mechanism": args.mechanism, "removed": True}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek users", description="SCRAM users, through the Kafka protocol")
    common = access.common_parser()
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", parents=[common], help="every user with a SCRAM credential, per mechanism")
    add = sub.add_parser("add", parents=[common], help="create a user's credential, or change its password")
    add.add_argument("user")
    add.add_argument("--password", required=True)
    add.add_argument("--iterations", type=int, default=8192, help="4096..16384 (default %(default)s)")
    remove = sub.add_parser("remove", parents=[common], help="delete a user's credential")
    remove.add_argument("user")
    for sp in (add, remove):
        sp.add_argument("--mechanism", choices=sorted(MECHANISMS), default="SCRAM-SHA-512")
    return ap


COMMANDS = {"list": list_users, "add": add_user, "remove": remove_user}


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run("odradek users", COMMANDS, args, AdminClient(access.from_arguments(args).confluent()))
