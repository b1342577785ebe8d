#!/usr/bin/env bash
# Spark's own Kafka source (org.apache.spark:spark-sql-kafka-0-10_2.13) and its runtime
# dependencies, resolved with Maven into the git-ignored .cache/spark-kafka/<version>/jars for
# bench/spark.py. Idempotent: a second call is free. The version is the venv's PySpark's; when
# Maven Central does not have that one (4.3.0 is not published there yet) the newest 4.x that
# is (FALLBACK) is used, and its directory name says which. SPARK_KAFKA_VERSION overrides both.
#
#   scripts/spark_kafka.sh          # prints the jars directory
set -euo pipefail
cd "$(dirname "$0")/.."
FALLBACK=4.2.0

resolve() {  # version -> 0 when .cache/spark-kafka/<version>/jars is complete
  local dir=.cache/spark-kafka/$1
  [ -f "$dir/stamp" ] && return 0
  mkdir -p "$dir"
  cat > "$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>odradek</groupId><artifactId>spark-kafka-bench</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>$1</version>
    </dependency>
  </dependencies>
</project>
POM
  mvn -q -B -f "$dir/pom.xml" -Dmaven.repo.local="$PWD/.cache/spark-kafka/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$PWD/$dir/jars" >&2 || return 1
  touch "$dir/stamp"
}

command -v mvn >/dev/null || { echo "spark_kafka.sh: Maven is needed (scripts/kafka.sh installs it)" >&2; exit 1; }
pyspark=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')
for version in ${SPARK_KAFKA_VERSION:-$pyspark $FALLBACK}; do
  if resolve "$version"; then
    [ "$version" = "$pyspark" ] || echo "spark_kafka.sh: using spark-sql-kafka $version with PySpark $pyspark" >&2
    echo "$PWD/.cache/spark-kafka/$version/jars"
    exit 0
  fi
done
echo "spark_kafka.sh: spark-sql-kafka-0-10_2.13 could not be resolved" >&2
exit 1
