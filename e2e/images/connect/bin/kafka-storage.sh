#!/bin/sh
# Apache Kafka's bin/kafka-storage.sh: formats a KRaft node's log directories (format, info).
#   kafka-storage.sh format -t CLUSTER_ID -c server.properties [--add-scram ...] [--ignore-formatted]
base_dir=$(dirname "$0")
export CLASSPATH="$base_dir/../libs-broker/*${CLASSPATH:+:$CLASSPATH}"
exec "$base_dir/kafka-run-class.sh" kafka.tools.StorageTool "$@"
