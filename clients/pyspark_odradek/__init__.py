"""Makes ``spark.read.format("odradek")`` work with no registration call: PySpark >= 4.0 imports
every top-level ``pyspark_*`` module on its Python path at start-up and registers the
``DefaultSource`` it defines (SPARK-45917, ``pyspark/sql/worker/lookup_data_sources.py``), as
Spark's Kafka source is found once its jar is on the class path. The source itself lives in
``odradek.spark``."""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
