"""PySpark data source "odradek": reads and writes topics through the gateway, with the column
names and options of Spark's built-in Kafka source (docs/spark.md).

    import odradek.spark
    odradek.spark.register(spark)
    df = spark.read.format("odradek").option("gateway", url).option("subscribe", "orders").load()
"""

from odradek.spark.source import OdradekDataSource


def register(spark) -> None:
    """Make ``format("odradek")`` known to this SparkSession."""
    spark.dataSource.register(OdradekDataSource)


__all__ = ["OdradekDataSource", "register"]
