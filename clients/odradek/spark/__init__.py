"""PySpark data source "odradek": reads and writes topics through the gateway."""
