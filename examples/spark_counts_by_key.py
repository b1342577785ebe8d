"""A Spark job over Odradek: count the records of each key in one topic and write one record
per key (key, count) to another topic, both through the gateway.

    spark-submit --master 'local[2]' examples/spark_counts_by_key.py \
        --gateway http://127.0.0.1:8080 --input orders --output order-counts [--token TOKEN]

(an https gateway with a private CA: SSL_CERT_FILE=<its CA> in spark-submit's environment)
"""

import argparse

from pyspark.sql import SparkSession


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--token", help="the gateway's bearer token, if it requires one")
    args = ap.parse_args()
    gateway = {"gateway": args.gateway, **({"token": args.token} if args.token else {})}
    spark = SparkSession.builder.appName("odradek-counts-by-key").getOrCreate()
    orders = (spark.read.format("odradek").options(**gateway)
              .option("subscribe", args.input).option("startingOffsets", "earliest").load())
    counts = orders.groupBy("key").count().selectExpr("key", "CAST(`count` AS STRING) AS value")
    counts.write.format("odradek").options(**gateway).option("topic", args.output).mode("append").save()
    spark.stop()


if __name__ == "__main__":
    main()
