#!/bin/sh
# Apache Kafka's bin/kafka-server-start.sh: a broker (KRaft: format its log directory first,
# kafka-storage.sh). Its jars beyond Connect's are in libs-broker/.
#   kafka-server-start.sh server.properties
base_dir=$(dirname "$0")
export CLASSPATH="$base_dir/../libs-broker/*${CLASSPATH:+:$CLASSPATH}"
export KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j.configuration=file:$base_dir/../config/connect-log4j.properties}"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
exec "$base_dir/kafka-run-class.sh" -name kafkaServer kafka.Kafka "$@"
