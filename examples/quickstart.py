"""Produce and consume through a running local cluster with a stock Kafka client.

    .venv/bin/odradek dev up --detach
    .venv/bin/python examples/quickstart.py [--bootstrap 127.0.0.1:9092]
"""

import argparse
import json
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def bootstrap_from_dev_cluster() -> str:
    out = subprocess.run([sys.executable, "-m", "odradek.cli", "dev", "status", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bootstrap_servers"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap")
    p.add_argument("--topic", default="quickstart")
    args = p.parse_args()
    bootstrap = args.bootstrap or bootstrap_from_dev_cluster()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(args.topic, num_partitions=3)])
    try:
        futures[args.topic].result(30)
        print(f"created topic {args.topic!r} with 3 partitions (replication factor: the cluster default)")
    except Exception as e:  # TOPIC_ALREADY_EXISTS on a second run
        print(f"topic {args.topic!r}: {e}")

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    started = int(time.time() * 1000)
    for i in range(1000):
        producer.produce(args.topic, key=f"user-{i % 10}", value=json.dumps({"n": i}).encode())
    producer.flush(30)
    print("produced 1000 records")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "quickstart",
                         "enable.auto.commit": False})
    offsets = consumer.offsets_for_times([TopicPartition(args.topic, p, started) for p in range(3)], 30)
    consumer.assign(offsets)
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 1000 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            seen += 1
    consumer.close()
    print(f"consumed {seen} records back: {'OK' if seen == 1000 else 'MISSING RECORDS'}")
    sys.exit(0 if seen == 1000 else 1)


if __name__ == "__main__":
    main()
