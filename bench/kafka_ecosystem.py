"""Kafka's ecosystem runtimes (MirrorMaker 2, Connect's FileStream connectors, Kafka Streams)
from Maven Central, for the compatibility suite: resolution of `bench/kafka/ecosystem/pom.xml`
(and compilation of the small apps beside it, ``*.java``), and the Java command line of one of
its mains.

    .venv/bin/python -m bench.kafka_ecosystem        # idempotent; prints the ecosystem dir

The dependency closure goes to ``.cache/kafka/<version>/ecosystem/libs`` (Maven's local
repository: the broker's, ``.cache/kafka/m2``), kept apart from ``bench.apache_kafka``'s
``libs`` so that adding a runtime never re-resolves (and never replaces under a running JVM)
the broker's and tools' jars. ``ODRADEK_KAFKA_ECOSYSTEM`` names another directory (a
worktree whose ``.cache`` is shared read-only). A stamp holding the pom's hash makes a second
call free.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench import apache_kafka

POM = apache_kafka.ROOT / "bench" / "kafka" / "ecosystem" / "pom.xml"
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
WORD_COUNT = "OdradekWordCount"   # bench/kafka/ecosystem/OdradekWordCount.java


def home() -> Path:
    override = os.environ.get("ODRADEK_KAFKA_ECOSYSTEM")
    return Path(override) if override else apache_kafka.HOME / "ecosystem"


def resolve() -> Path:
    """Resolve (once) and return the ecosystem home; raises ``apache_kafka.ResolutionError``."""
    dir = home()
    h = hashlib.sha256(POM.read_bytes())
    for src in sorted(POM.parent.glob("*.java")):
        h.update(src.name.encode() + src.read_bytes())
    stamp, stamp_text = dir / "resolved.stamp", h.hexdigest()
    if stamp.exists() and stamp.read_text() == stamp_text:
        return dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise apache_kafka.ResolutionError("`mvn` is not installed (scripts/kafka.sh installs it)")
    repo = dir / "m2" if os.environ.get("ODRADEK_KAFKA_ECOSYSTEM") else apache_kafka.CACHE / "m2"
    libs, partial = dir / "libs", dir / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-B", "-q", "-f", str(POM), f"-Dmaven.repo.local={repo}", "dependency:copy-dependencies",
           f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if proc.returncode != 0:
        raise apache_kafka.ResolutionError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                                           f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    _compile(dir)
    stamp.write_text(stamp_text)
    return dir


def _compile(dir: Path) -> None:
    """``bench/kafka/ecosystem/*.java`` (small apps Kafka does not publish) into ``classes/``."""
    classes = dir / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    sources = sorted(str(s) for s in POM.parent.glob("*.java"))
    javac = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", str(dir / "libs" / "*"), *sources],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    if javac.returncode != 0:
        raise apache_kafka.ResolutionError(f"javac failed:\n{javac.stdout}\n{javac.stderr}")


def java_argv(main_class: str, *args: str, log4j: Path, heap: str = "-Xmx512M") -> list[str]:
    """A JVM running ``main_class`` on the ecosystem's jars, logging as ``log4j`` says."""
    return ["java", heap, "-XX:+UseG1GC", "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{log4j}",
            "-cp", f"{resolve() / 'classes'}:{resolve() / 'libs' / '*'}", main_class, *args]


if __name__ == "__main__":
    try:
        print(resolve())
    except apache_kafka.ResolutionError as e:
        sys.exit(str(e))
