"""PySpark data source "odradek": reads and writes topics through the gateway, with the column
names and options of Spark's built-in Kafka source (docs/spark.md).

    df = spark.read.format("odradek").option("gateway", url).option("subscribe", "orders").load()

PySpark registers the source by itself through the ``pyspark_odradek`` package beside this one;
``register`` is for a session whose Python path lacks it.
"""

from odradek.spark.source import OdradekDataSource


def register(spark) -> None:
    """Make ``format("odradek")`` known to this SparkSession."""
    spark.dataSource.register(OdradekDataSource)


__all__ = ["OdradekDataSource", "register"]
