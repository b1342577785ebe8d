#!/usr/bin/env bash
# Stages the Connect image's build context (the Containerfile beside this script) in DIR:
#   jre/                   a Java runtime jlink cuts from this host's JDK (Debian's
#                          default-jdk-headless, which scripts/kafka.sh installs)
#   libs/                  Kafka's jars from Maven Central (bench.kafka_ecosystem: the compat
#                          suite's resolution) without Kafka Streams and the FileStream
#                          connectors: Connect's and MirrorMaker's class path
#   libs-broker/           the rest of the broker's (bench.apache_kafka: kafka_2.13, the KRaft
#                          and storage modules, Scala, ZooKeeper's client), which
#                          kafka-server-start.sh and kafka-storage.sh add to the class path
#   plugins/               empty: like Apache's distribution the image loads no example
#                          connector; an OdradekConnect adds plugins with spec.plugins
#   bin/, config/          Kafka's start scripts' names and environment, its log4j settings
# e2e/images/build.sh (podman, the local e2e node) and e2e/kind.sh (docker) build from it.
#
#   e2e/images/connect/stage.sh DIR      stage the context
#   e2e/images/connect/stage.sh --name   print the image's name (the operator's default)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
if [ "${1:-}" = --name ]; then
  echo "docker.io/odradek/connect:$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' bench/kafka/ecosystem/pom.xml)"
  exit 0
fi
out="$1"
# Java SE's modules and the JDK's that Kafka's clients and Connect use (EC and PKCS#11 crypto for
# TLS, Unsafe for its compression libraries, JMX, DNS, JAAS/GSS)
modules="java.se,jdk.crypto.ec,jdk.crypto.cryptoki,jdk.unsupported,jdk.management,jdk.management.agent,\
jdk.naming.dns,jdk.security.auth,jdk.security.jgss,jdk.zipfs,jdk.charsets,jdk.jfr,jdk.net"
eco="$(.venv/bin/python -m bench.kafka_ecosystem)"   # resolved by `make test-deps`; else Maven now
broker="$(.venv/bin/python -m bench.apache_kafka resolve)"
cp -r "$here/Containerfile" "$here/bin" "$here/config" "$out/"
jlink --add-modules "$modules" --strip-debug --no-man-pages --no-header-files --compress=2 --output "$out/jre"
mkdir -p "$out/libs" "$out/libs-broker" "$out/plugins"
find "$eco/libs" -name '*.jar' ! -name 'kafka-streams-*' ! -name 'rocksdbjni-*' ! -name 'connect-file-*' \
  -exec cp -t "$out/libs" {} +
# Kept off Connect's class path: its plugin scan would read every class of Scala and the broker.
for jar in "$broker"/libs/*.jar; do
  [ -e "$out/libs/$(basename "$jar")" ] || cp "$jar" "$out/libs-broker/"
done
