#!/usr/bin/env bash
# Apache Kafka next to Odradek, for the benchmark (`make bench`) and the compatibility suite
# (tests/compat). Idempotent like scripts/bootstrap.sh: installs Maven from Debian's packages
# if missing, resolves Kafka 3.9.x (bench/kafka/pom.xml: kafka_2.13 + kafka-tools and their
# dependency closure) into the git-ignored .cache/kafka/, and runs KRaft clusters.
#
#   scripts/kafka.sh resolve                       # once; later calls are free
#   scripts/kafka.sh resolve --pom bench/kafka4/pom.xml   # Kafka 4.x's clients and tools (compat suite)
#   scripts/kafka.sh up --nodes 1|3 --dir DIR      # detached; PIDs and ports in DIR/cluster.json
#   scripts/kafka.sh status --dir DIR
#   scripts/kafka.sh down --dir DIR                # signals the recorded PIDs only
#   scripts/kafka.sh run CLASS [ARGS...]           # e.g. org.apache.kafka.tools.TopicCommand --list ...
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
  echo "kafka.sh: installing Maven and a JDK from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven default-jdk-headless >/dev/null
fi

exec .venv/bin/python -m bench.apache_kafka "$@"
