"""A zip of the data source for ``spark-submit --py-files`` (no install on the cluster's nodes):

    python -m odradek.spark.bundle odradek-spark.zip

It holds odradek.spark, odradek.serde and odradek.client (all the executors import), an
``odradek/__init__.py`` (Python's zipimport does not find namespace packages, which is what
``odradek`` is in the source tree) and ``pyspark_odradek``, through which PySpark registers
``format("odradek")`` by itself. httpx, pyarrow, fastavro, jsonschema and protobuf must be on the
nodes (PySpark needs pyarrow; the last three decode and encode keyFormat/valueFormat).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

PACKAGES = ("client", "serde", "spark")


def build(out: Path) -> Path:
    root = Path(__file__).resolve().parents[1]  # the odradek directory under clients/
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("odradek/__init__.py", '"""odradek.client and odradek.spark, bundled for --py-files."""\n')
        for package in PACKAGES:
            for source in sorted((root / package).rglob("*.py")):
                z.write(source, Path("odradek") / source.relative_to(root))
        # beside odradek/ both in clients/ and in an installed wheel's site-packages
        z.write(root.parent / "pyspark_odradek" / "__init__.py", "pyspark_odradek/__init__.py")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m odradek.spark.bundle OUT.zip")
    print(build(Path(sys.argv[1])))
