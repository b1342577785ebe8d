#!/bin/sh
# Apache Kafka's bin/connect-mirror-maker.sh: MirrorMaker 2 in dedicated mode.
#   connect-mirror-maker.sh mm2.properties [--clusters alias...]
base_dir=$(dirname "$0")
export KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j.configuration=file:$base_dir/../config/connect-log4j.properties}"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256M -Xmx2G}"
exec "$base_dir/kafka-run-class.sh" -name mirrorMaker org.apache.kafka.connect.mirror.MirrorMaker "$@"
