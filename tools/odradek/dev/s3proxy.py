"""S3Proxy: the S3-compatible object store of tiered storage in development and tests.

A real S3 server (Jetty speaking the S3 REST API with AWS signature v2/v4 checks) over jclouds'
``filesystem`` backend: each object is a file ``<basedir>/<bucket>/<key>``, so objects survive
a restart of the server and a test can corrupt one on disk. Why S3Proxy and not another server:
docs/tiered-storage.md.

Installation: ``org.gaul:s3proxy:<VERSION>:jar:jar-with-dependencies`` (one self-contained jar)
from Maven Central through ``mvn dependency:copy`` (Maven checks Central's checksums) into
``.cache/s3proxy/<VERSION>/``; ``ODRADEK_S3PROXY_HOME`` names another directory (a worktree
whose ``.cache`` is shared read-only). ``make test-deps`` runs::

    .venv/bin/python -m odradek.dev.s3proxy      # idempotent; exits non-zero if it cannot fetch

``S3ProxyServer`` owns one process: 127.0.0.1, a free port (or a given one, for a restart),
its credentials and bucket; ``start()`` returns once the bucket answers, ``stop()`` ends the
process by its PID.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from odradek.dev.processes import candidate_port, listening_ports
from odradek.dev.waiting import wait_until

VERSION = "4.1.0"
ARTIFACT = f"org.gaul:s3proxy:{VERSION}:jar:jar-with-dependencies"
JAR_NAME = f"s3proxy-{VERSION}-jar-with-dependencies.jar"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# tools/odradek/dev/s3proxy.py -> the checkout (editable install: the CLI and the tests)
ROOT = Path(__file__).resolve().parents[3]
LOG_NAME = "s3proxy.log"
_ATTEMPTS = 5     # candidate ports tried when another process takes the one chosen


class S3ProxyError(RuntimeError):
    """S3Proxy could not be installed or did not serve."""


def home() -> Path:
    override = os.environ.get("ODRADEK_S3PROXY_HOME")
    return Path(override) if override else ROOT / ".cache" / "s3proxy" / VERSION


def installed_jar() -> Path | None:
    jar = home() / JAR_NAME
    return jar if jar.is_file() else None


def install() -> Path:
    """The jar, fetched once; ``S3ProxyError`` (with Maven's output) if it cannot be."""
    jar = installed_jar()
    if jar is not None:
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise S3ProxyError("`mvn` is not installed (scripts/kafka.sh installs Maven from Debian's packages)")
    dir = home()
    partial = dir / "jar.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-B", "-q", f"-Dmaven.repo.local={dir / 'm2'}", f"{DEPENDENCY_PLUGIN}:copy",
           f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={partial}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if proc.returncode != 0 or not (partial / JAR_NAME).is_file():
        raise S3ProxyError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    (partial / JAR_NAME).rename(dir / JAR_NAME)   # atomic: a half download is never "installed"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(dir / "m2", ignore_errors=True)  # the jar is all we keep (55 MB, not twice)
    return dir / JAR_NAME


@dataclass
class S3ProxyServer:
    """One S3Proxy process storing under ``directory/data``, logging to ``directory/s3proxy.log``."""

    directory: Path
    bucket: str = "odradek-tiered"
    port: int = 0
    access_key: str = "odradek"
    secret_key: str = field(default_factory=lambda: secrets.token_hex(16))
    timeout: float = 60.0
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.directory) / "data"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise S3ProxyError("S3Proxy is not started")
        return self._proc.pid

    def object_path(self, key: str) -> Path:
        """Where the filesystem backend keeps ``key`` of the bucket (tests corrupt it there)."""
        return self.data_dir / self.bucket / key

    def start(self) -> "S3ProxyServer":
        jar = installed_jar()
        if jar is None:
            raise S3ProxyError(f"S3Proxy is not installed in {home()} (make test-deps)")
        (self.data_dir / self.bucket).mkdir(parents=True, exist_ok=True)  # the backend's bucket is a directory
        attempts = _ATTEMPTS if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or candidate_port()
            self._proc = self._launch(jar, port)
            if self._wait_serving(port, last=attempt == attempts - 1):
                self.port = port
                return self
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, SIGKILL after ``timeout``: the process we started, by its PID."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
        self._proc = None

    def __enter__(self) -> "S3ProxyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _launch(self, jar: Path, port: int) -> subprocess.Popen:
        conf = Path(self.directory) / "s3proxy.properties"
        conf.write_text(f"s3proxy.endpoint=http://127.0.0.1:{port}\n"
                        "s3proxy.authorization=aws-v2-or-v4\n"
                        f"s3proxy.identity={self.access_key}\n"
                        f"s3proxy.credential={self.secret_key}\n"
                        "jclouds.provider=filesystem\n"
                        f"jclouds.filesystem.basedir={self.data_dir}\n")
        conf.chmod(0o600)   # it holds the secret key
        with open(Path(self.directory) / LOG_NAME, "ab") as log:
            return subprocess.Popen(["java", "-Xmx256m", "-XX:+UseSerialGC", "-jar", str(jar), "--properties", str(conf)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.directory, start_new_session=True)

    def _wait_serving(self, port: int, last: bool) -> bool:
        """True once this process serves the bucket on ``port``; False if it exited and another
        port may be tried (the chosen one was taken), else ``S3ProxyError`` with its log."""
        proc = self._proc

        def up() -> bool:
            if proc.poll() is not None:
                raise S3ProxyError(f"S3Proxy exited with {proc.returncode} (port {port}):\n{self.log_tail()}")
            return port in listening_ports(proc.pid) and _answers(f"http://127.0.0.1:{port}/{self.bucket}")
        try:
            wait_until(up, self.timeout, f"S3Proxy to serve on port {port}", retry_on=())
            return True
        except S3ProxyError:
            self._proc = None
            if last:
                raise
            return False
        except TimeoutError:
            self.stop()
            raise S3ProxyError(f"S3Proxy did not serve on port {port} within {self.timeout}s:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        path = Path(self.directory) / LOG_NAME
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def _answers(url: str) -> bool:
    """Any HTTP answer (an unsigned request gets 403) means the S3 endpoint is up."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


if __name__ == "__main__":
    try:
        print(install())
    except S3ProxyError as e:
        sys.exit(str(e))
