"""A real standalone ZooKeeper server on loopback, for development and tests.

Owns: writing ``zoo.cfg`` into a directory, launching Debian's ZooKeeper (3.8) with
``java ... ZooKeeperServerMain zoo.cfg`` and a log file of its own, waiting until it
serves (the process itself listens on its port and ``srvr`` reports ``Mode:``; ``ruok``
answers too early), and stopping it by PID (SIGTERM, then SIGKILL after a deadline).

Its port: ZooKeeper cannot bind port 0 and say which it got, so port 0 means "try candidate
ports" (``candidate_port``: below the kernel's ephemeral range) and launch again on another
when the JVM exits with ``Address already in use``; a port given explicitly (a restart) that is
taken fails at once (``PortTaken``).

With ``ServerTls`` it serves TLS only, as Strimzi runs ZooKeeper: ``secureClientPort`` (Netty)
and no plaintext client port, its certificate and the CA as PEM files (``ssl.keyStore.type=PEM``),
and a client certificate from that CA required (``ssl.clientAuth=need``); ``srvr`` then goes
over TLS too, with the same certificate.

Two ways to use it:
- ``ZooKeeperServer(directory)``: owns the process (``start()`` / ``stop()``, or ``with``).
- ``start_detached(directory)`` -> ``DetachedZooKeeper(pid, port)`` for ``odradek dev up
  --detach``; later ``is_running(pid)`` and ``stop_pid(pid)`` from any process.

The jars come from Debian's ``zookeeper`` package (``libzookeeper-java`` and
``libslf4j-java``); ``zookeeper.jar``'s manifest lists jute, netty and the rest.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from odradek.dev.processes import candidate_port, listening_ports
from odradek.dev.waiting import wait_until

# netty-codec: Netty's TLS handler needs it and zookeeper.jar's manifest does not list it (Debian)
JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar", "/usr/share/java/netty-codec.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
LOG_NAME = "zookeeper.log"
CONFIG_NAME = "zoo.cfg"
PID_NAME = "zookeeper.pid"
_ATTEMPTS = 5         # candidate ports tried before giving up
PORT_TAKEN = "Address already in use"   # Java's BindException, in the log before the JVM exits 1


class ZooKeeperNotInstalled(RuntimeError):
    """Java or Debian's ZooKeeper jars are missing on this machine."""


class ZooKeeperFailed(RuntimeError):
    """The server exited or did not serve before the deadline; the message has its log tail."""


class PortTaken(ZooKeeperFailed):
    """The server exited because another process holds its port."""


def check_installed() -> None:
    missing = [j for j in JARS if not os.path.exists(j)]
    if missing or not _which("java"):
        what = ", ".join(missing) if missing else "java"
        raise ZooKeeperNotInstalled(
            f"ZooKeeper for development needs {what}: run scripts/bootstrap.sh "
            "(it installs Debian's zookeeper package, which brings a JRE and slf4j)")


@dataclass(frozen=True, slots=True)
class ServerTls:
    """``keystore``: PEM with the server's certificate chain and key (also what ``srvr`` presents
    as a client); ``truststore``: the CA every client's certificate must chain to."""
    keystore: str
    truststore: str

    def config(self, port: int) -> str:
        """``zoo.cfg``'s lines for TLS only on ``port`` (X.509 authentication: ZooKeeper
        authenticates each client as ``x509:<subject DN>``)."""
        return (f"secureClientPort={port}\n"
                "secureClientPortAddress=127.0.0.1\n"
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n"
                f"ssl.keyStore.location={self.keystore}\nssl.keyStore.type=PEM\n"
                f"ssl.trustStore.location={self.truststore}\nssl.trustStore.type=PEM\n"
                "ssl.clientAuth=need\n"
                "ssl.hostnameVerification=false\n")   # clients are known by certificate, not address

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.truststore)
        context.load_cert_chain(self.keystore)
        return context


def write_config(directory: str | os.PathLike, port: int, tls: ServerTls | None = None) -> Path:
    """Write ``zoo.cfg`` (data in ``<directory>/data``); return its path."""
    d = Path(directory)
    (d / "data").mkdir(parents=True, exist_ok=True)
    cfg = d / CONFIG_NAME
    listener = tls.config(port) if tls is not None else f"clientPort={port}\nclientPortAddress=127.0.0.1\n"
    cfg.write_text(
        "tickTime=500\n"            # short ticks: sessions may be as short as 1 s in tests
        "minSessionTimeout=1000\n"
        "maxSessionTimeout=60000\n"
        "initLimit=10\nsyncLimit=5\n"
        f"dataDir={(d / 'data').resolve()}\n"
        f"{listener}"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=srvr,ruok,stat,mntr\n"
        "maxClientCnxns=0\n"
    )
    return cfg


def four_letter(port: int, command: str = "srvr", timeout: float = 1.0, tls: ServerTls | None = None) -> str:
    """Send a four-letter command (over TLS with ``tls``); return the answer ('' if the server
    closed at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as plain, \
            (tls.client_context().wrap_socket(plain, server_hostname="127.0.0.1") if tls else plain) as s:
        s.sendall(command.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def serving(port: int, tls: ServerTls | None = None) -> bool:
    try:
        return any(line.startswith("Mode:") for line in four_letter(port, tls=tls).splitlines())
    except OSError:   # ssl.SSLError too: a TLS server that is still starting
        return False


def _launch(directory: Path, port: int, tls: ServerTls | None) -> subprocess.Popen:
    check_installed()
    cfg = write_config(directory, port, tls)
    log = open(directory / LOG_NAME, "ab")
    try:
        return subprocess.Popen(
            ["java", "-Xmx256m", "-Dzookeeper.log.dir=" + str(directory),
             "-cp", ":".join(JARS), MAIN_CLASS, str(cfg)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=directory, start_new_session=True)
    finally:
        log.close()


def _wait_serving(proc: subprocess.Popen, directory: Path, port: int, timeout: float, since: int,
                  tls: ServerTls | None) -> None:
    """Until this very process listens on ``port`` and answers ``srvr`` (another server that holds
    the port would answer too); ``PortTaken`` as soon as it exits for want of the port."""
    def up() -> bool:
        if proc.poll() is not None:
            kind = PortTaken if PORT_TAKEN in _log_since(directory, since) else ZooKeeperFailed
            raise kind(f"ZooKeeper exited with {proc.returncode} (port {port}):\n{_log_tail(directory)}")
        return port in listening_ports(proc.pid) and serving(port, tls)
    try:
        wait_until(up, timeout, f"ZooKeeper to serve on port {port}", retry_on=())
    except TimeoutError:
        stop_pid(proc.pid)
        proc.wait()
        raise ZooKeeperFailed(f"ZooKeeper did not serve on port {port} within {timeout}s:\n"
                              f"{_log_tail(directory)}") from None


def _start(directory: str | os.PathLike, port: int, timeout: float,
           tls: ServerTls | None = None) -> tuple[subprocess.Popen, int]:
    """Launch and wait; with port 0 try candidate ports until one is not taken. A given port
    (a restart: clients know it) that is taken fails at once, saying so."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    attempts = _ATTEMPTS if port == 0 else 1
    for attempt in range(attempts):
        chosen = port or candidate_port()
        since = _log_size(d)
        proc = _launch(d, chosen, tls)
        try:
            _wait_serving(proc, d, chosen, timeout, since, tls)
        except PortTaken:
            if attempt == attempts - 1:
                raise
            continue
        (d / PID_NAME).write_text(f"{proc.pid}\n")
        return proc, chosen
    raise AssertionError("unreachable")


class ZooKeeperServer:
    """A ZooKeeper process owned by this object."""

    def __init__(self, directory: str | os.PathLike, port: int = 0, timeout: float = 30.0,
                 tls: ServerTls | None = None) -> None:
        self.directory = Path(directory)
        self._port = port
        self._timeout = timeout
        self._tls = tls
        self._proc: subprocess.Popen | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("ZooKeeper is not started")
        return self._proc.pid

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self._port}"

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_NAME

    def start(self) -> "ZooKeeperServer":
        self._proc, self._port = _start(self.directory, self._port, self._timeout, self._tls)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None:
            return
        stop_pid(self._proc.pid, timeout)
        self._proc.wait()
        self._proc = None

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass(frozen=True, slots=True)
class DetachedZooKeeper:
    pid: int
    port: int
    directory: Path

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_detached(directory: str | os.PathLike, port: int = 0, timeout: float = 30.0,
                   tls: ServerTls | None = None) -> DetachedZooKeeper:
    """Start a server that outlives this process (own session); stop it with ``stop_pid``."""
    proc, chosen = _start(directory, port, timeout, tls)
    return DetachedZooKeeper(proc.pid, chosen, Path(directory))


def is_running(pid: int) -> bool:
    """True while ``pid`` is a live (not zombie) ZooKeeper server process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != b"Z" and MAIN_CLASS.encode() in cmdline


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the ZooKeeper server ``pid``, SIGKILL it after ``timeout``; reap it if it is ours.

    Does nothing if ``pid`` is gone or is no longer a ZooKeeper server (PID reuse)."""
    if not is_running(pid):
        _reap(pid)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not is_running(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while is_running(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _which(name: str) -> bool:
    return any(os.access(os.path.join(p, name), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep) if p)


def _log_tail(directory: Path, lines: int = 30) -> str:
    try:
        return "\n".join((directory / LOG_NAME).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _log_size(directory: Path) -> int:
    try:
        return (directory / LOG_NAME).stat().st_size
    except OSError:
        return 0


def _log_since(directory: Path, since: int) -> str:
    try:
        with open(directory / LOG_NAME, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")
    except OSError:
        return ""
