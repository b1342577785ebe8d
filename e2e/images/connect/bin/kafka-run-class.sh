#!/bin/sh
# Apache Kafka's bin/kafka-run-class.sh, reduced to what a container needs, same environment:
# KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS (Kafka's defaults), KAFKA_LOG4J_OPTS, KAFKA_OPTS,
# KAFKA_JMX_OPTS, LOG_DIR; the class path is libs/* then CLASSPATH (Kafka's appends it too). `-name X` (the daemon's name, which
# Kafka's scripts use for the GC log file) is accepted and ignored: a container logs to stdout.
set -e
base_dir=$(dirname "$0")/..
if [ "$1" = "-name" ]; then shift 2; fi
LOG_DIR=${LOG_DIR:-/tmp/logs}
mkdir -p "$LOG_DIR"
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx256M}
KAFKA_JVM_PERFORMANCE_OPTS=${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}
KAFKA_LOG4J_OPTS=${KAFKA_LOG4J_OPTS:--Dlog4j.configuration=file:$base_dir/config/tools-log4j.properties}
# shellcheck disable=SC2086  # the *_OPTS are lists of options, split as Kafka's script splits them
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_JMX_OPTS "-Dkafka.logs.dir=$LOG_DIR" \
  $KAFKA_LOG4J_OPTS -cp "$base_dir/libs/*${CLASSPATH:+:$CLASSPATH}" $KAFKA_OPTS "$@"
