"""A one-node Kubernetes cluster where pods really run, without Docker: the e2e suite's cluster on
machines (like CI's) that have no container engine and no image registry.

    sudo .venv/bin/python e2e/local_node.py [--dir DIR]   # prints KUBECONFIG; Ctrl-C stops it

Everything runs on this host, inside a network namespace of its own (``odradek-e2e-<pid>``)
joined to the host by a veth pair: the node's address is ``10.231.K.2``, the host's end
``10.231.K.1``. So kube-proxy's iptables rules, the pods' bridge and every listening port stay
out of the host's network, and the namespace's removal takes them all away.

- control plane: etcd + kube-apiserver + kube-controller-manager (every default controller:
  ServiceAccount tokens, root CA, StatefulSets, PV binding) and kube-scheduler, built from
  the Go module proxy by ``scripts/k8s/build.sh``
- node: kubelet (cgroupfs, cgroup v1) -> containerd 1.6's CRI plugin -> runc, Debian's CNI
  bridge plugin (pods in 10.232.0.0/24), kube-proxy (iptables, masquerading every Service
  connection: no br_netfilter needed for hairpin traffic), CoreDNS on the node's address as
  the cluster DNS (a host process: there is no registry to pull its image from)
- images: ``e2e/images/build.sh`` archives imported with ``ctr`` (the Odradek image from the
  project's Dockerfile, ZooKeeper, Kafka Connect's JVM, pause); kubelet never pulls. They are
  built while the control plane and containerd start and imported side by side while kubelet
  registers the node.
- storage: a default StorageClass of local PersistentVolumes (directories under DIR), so a
  StatefulSet pod that comes back gets its own volume back

Processes are started by this module and stopped by PID; mounts made under DIR are unmounted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from odradek.dev.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
NODE_NAME = "odradek-e2e"
POD_CIDR = "10.232.0.0/24"
STORAGE_CLASS = "odradek-e2e-local"
LOCAL_VOLUMES = 12
MIN_FREE_DISK = 6 << 30   # imported images (and unpacked), volumes, logs
K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
                "kubectl", "helm", "coredns")
HOST_TOOLS = ("containerd", "ctr", "runc", "podman", "debootstrap", "jlink", "iptables", "conntrack", "nsenter", "ip")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


control_plane = _load("odradek_k8s_control_plane", ROOT / "scripts" / "k8s" / "control_plane.py")
free_port, terminate = control_plane.free_port, control_plane.terminate


def missing_prerequisites() -> list[str]:
    """What this host lacks to run the node (``scripts/e2e_node.sh`` installs it)."""
    missing = [t for t in HOST_TOOLS if not shutil.which(t)]
    if os.geteuid() != 0:
        missing.append("root (containerd, kubelet and network namespaces need it)")
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("CNI plugins in /usr/lib/cni (Debian's containernetworking-plugins)")
    return missing


def build_images() -> list[Path]:
    proc = subprocess.run([str(ROOT / "e2e" / "images" / "build.sh")], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:   # say why (e.g. release N-1 missing from a shallow clone's history)
        raise RuntimeError(f"e2e/images/build.sh exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return [Path(line) for line in proc.stdout.split()]


class LocalNode:
    """``images`` builds the archives to import (``build_images``): it runs while the control plane
    and containerd start, and the archives are imported while kubelet registers the node."""

    def __init__(self, workdir: Path, bins: dict[str, Path], images: Callable[[], list[Path]]) -> None:
        self.dir = Path(workdir).resolve()
        self.bins, self.images = bins, images
        self.importing: list[tuple[Path, subprocess.Popen]] = []
        self.ns = f"odradek-e2e-{os.getpid()}"
        k = os.getpid() % 250 + 1
        self.host_ip, self.node_ip = f"10.231.{k}.1", f"10.231.{k}.2"
        self.veth = (f"odh{os.getpid()}"[:15], f"odn{os.getpid()}"[:15])
        self.run_dir = Path(f"/run/odradek-e2e-{os.getpid()}")  # unix socket paths stay short
        self.prefix = ("nsenter", f"--net=/run/netns/{self.ns}")
        self.procs: dict[str, subprocess.Popen] = {}
        self.cp = None
        self.kubeconfig = self.dir / "k8s" / "kubeconfig"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 300.0) -> "LocalNode":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._check_disk()
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                archives = pool.submit(self.images)
                self._network()
                self.cp = control_plane.ControlPlane(
                    self.dir / "k8s", self.bins["kube-apiserver"], self.bins["kube-controller-manager"],
                    address=self.node_ip, prefix=self.prefix, with_nodes=True).start()
                self._containerd()
                self._start_imports(archives.result())
            self._coredns()
            self._kubelet()
            self._spawn("kube-scheduler", [str(self.bins["kube-scheduler"]), "--kubeconfig", str(self.kubeconfig),
                                           "--leader-elect=false", "--bind-address", "127.0.0.1",
                                           "--secure-port", str(free_port()), "--v=1"])
            self._until(self._node_ready, timeout, "node Ready")
            self._spawn("kube-proxy", [
                str(self.bins["kube-proxy"]), "--kubeconfig", str(self.kubeconfig), "--hostname-override", NODE_NAME,
                "--proxy-mode", "iptables", "--masquerade-all", "--cluster-cidr", POD_CIDR,
                "--conntrack-max-per-core", "0", "--metrics-bind-address", f"127.0.0.1:{free_port()}",
                "--healthz-bind-address", f"127.0.0.1:{free_port()}", "--v=1"])
            self._storage()
            self._await_imports()
        except BaseException:
            self.stop()
            raise
        return self

    def _check_disk(self) -> None:
        """Refuse to start on a disk too full for the images and volumes: kubelet would evict the
        pods and the suite would wait out its timeouts without saying why."""
        free = shutil.disk_usage(self.dir).free
        if free < MIN_FREE_DISK:
            raise RuntimeError(f"the e2e node needs {MIN_FREE_DISK >> 30} GiB free under {self.dir}, "
                               f"{free / 2**30:.1f} GiB are (podman image prune, uv cache prune free some)")

    def stop(self) -> None:
        """Pods first (kubelet tears their sandboxes and networks down), then every process by PID,
        then mounts, the network namespace and the node's state."""
        for name in ("kube-controller-manager", "kube-scheduler"):
            if self.cp and name in self.cp.procs:
                terminate(self.cp.procs.pop(name))
            elif name in self.procs:
                terminate(self.procs.pop(name))
        if "kubelet" in self.procs and self.procs["kubelet"].poll() is None:
            self._delete_all_pods()
        for name in reversed(list(self.procs)):
            if name != "containerd":
                terminate(self.procs.pop(name))
        while self.importing:   # start() failed before they ended
            terminate(self.importing.pop()[1])
        if "containerd" in self.procs:
            self._kill_containers()
            terminate(self.procs.pop("containerd"))
        if self.cp:
            self.cp.stop()
        self._unmount_all()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.veth[0]], capture_output=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        shutil.rmtree(self.dir / "containerd", ignore_errors=True)

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}

    # -- parts -------------------------------------------------------------------------------
    def _network(self) -> None:
        host, node = self.veth
        for argv in (["ip", "netns", "add", self.ns],
                     ["ip", "link", "add", host, "type", "veth", "peer", "name", node],
                     ["ip", "link", "set", node, "netns", self.ns],
                     ["ip", "addr", "add", f"{self.host_ip}/30", "dev", host],
                     ["ip", "link", "set", host, "up"],
                     ["ip", "-n", self.ns, "addr", "add", f"{self.node_ip}/30", "dev", node],
                     ["ip", "-n", self.ns, "link", "set", node, "up"],
                     ["ip", "-n", self.ns, "link", "set", "lo", "up"],
                     ["ip", "-n", self.ns, "route", "add", "default", "via", self.host_ip],
                     [*self.prefix, "sysctl", "-qw", "net.ipv4.ip_forward=1"]):
            subprocess.run(argv, check=True, capture_output=True)

    def _containerd(self) -> None:
        cni = self.dir / "cni"
        cni.mkdir(exist_ok=True)
        (cni / "10-odradek-e2e.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0", "name": "odradek-e2e",
            "plugins": [{"type": "bridge", "bridge": "odr0", "isGateway": True, "ipMasq": True, "hairpinMode": True,
                         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                                  "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(self.dir / "cni-ipam")}},
                        {"type": "portmap", "capabilities": {"portMappings": True}}]}))
        self.containerd_sock = self.run_dir / "containerd.sock"
        # Root here may lack CAP_SYS_RESOURCE (CI's sandboxes): runc fails ("can't get final
        # child's PID from pipe") to set a limit above the caller's own hard limits.
        spec = json.loads(subprocess.run(["ctr", "oci", "spec"], check=True, capture_output=True, text=True).stdout)
        spec["process"]["rlimits"] = [{"type": f"RLIMIT_{name}", "hard": hard, "soft": hard}
                                      for name, hard in (("NOFILE", resource.getrlimit(resource.RLIMIT_NOFILE)[1]),
                                                         ("NPROC", resource.getrlimit(resource.RLIMIT_NPROC)[1]))]
        (self.dir / "runtime-spec.json").write_text(json.dumps(spec))
        config = self.dir / "containerd.toml"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config.write_text(f"""version = 2
root = "{self.dir / 'containerd' / 'root'}"
state = "{self.run_dir / 'containerd'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{self.containerd_sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.dir / 'containerd' / 'opt'}"
[{cri}]
  sandbox_image = "registry.k8s.io/pause:3.10"
  netns_mounts_under_state_dir = true
  # Without CAP_SYS_RESOURCE (CI's root) a negative oom_score_adj (sandboxes' -998) fails.
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "{self.dir / 'runtime-spec.json'}"
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
""")
        self._spawn("containerd", ["containerd", "--config", str(config)])
        self._until(lambda: self._ctr("version").returncode == 0, 60, "containerd", "containerd")

    def _ctr_argv(self) -> list[str]:
        return ["ctr", "--address", str(self.containerd_sock), "--namespace", "k8s.io"]

    def _ctr(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self._ctr_argv(), *args], capture_output=True, text=True, timeout=600)

    def _start_imports(self, archives: list[Path]) -> None:
        """Every archive at once: containerd takes them side by side while the node starts (no pod
        runs before ``start`` returns, so none waits for an image)."""
        for archive in archives:
            self.importing.append((archive, subprocess.Popen(
                [*self._ctr_argv(), "images", "import", "--no-unpack", str(archive)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)))

    def _await_imports(self, timeout: float = 600) -> None:
        while self.importing:
            archive, proc = self.importing[0]
            _, err = proc.communicate(timeout=timeout)
            self.importing.pop(0)
            if proc.returncode != 0:
                raise RuntimeError(f"ctr images import {archive}: {err}")

    def _coredns(self) -> None:
        corefile = self.dir / "Corefile"
        corefile.write_text(f""".:53 {{
    bind {self.node_ip}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig}
        pods insecure
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
""")
        self._spawn("coredns", [str(self.bins["coredns"]), "-conf", str(corefile)])

    def _kubelet(self) -> None:
        root = self.dir / "kubelet"
        root.mkdir(exist_ok=True)
        (self.dir / "resolv.conf").write_text(f"nameserver {self.node_ip}\n")
        config = self.dir / "kubelet.json"
        config.write_text(json.dumps({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
            "cgroupsPerQOS": False, "enforceNodeAllocatable": [],
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "address": self.node_ip, "port": free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [self.node_ip], "clusterDomain": "cluster.local", "resolvConf": str(self.dir / "resolv.conf"),
            "podLogsDir": str(self.dir / "pod-logs"),
            # A shared CI disk is often fuller than kubelet's defaults allow (even 1% of a 250 GB
            # disk is 2.5 GB): evict only when it is really full. start() refuses a fuller disk.
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "256Mi",
                             "imagefs.available": "256Mi", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False, "maxPods": 60}))
        self._spawn("kubelet", [str(self.bins["kubelet"]), "--config", str(config), "--kubeconfig", str(self.kubeconfig),
                                "--hostname-override", NODE_NAME, "--node-ip", self.node_ip,
                                "--root-dir", str(root), "--cert-dir", str(root / "pki"), "--v=1"])

    def _storage(self) -> None:
        """A default StorageClass and local PersistentVolumes (directories, open to any pod user)."""
        docs = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": {"name": STORAGE_CLASS,
                              "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                 "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
                 "reclaimPolicy": "Delete"}]
        for i in range(LOCAL_VOLUMES):
            path = self.dir / "volumes" / f"pv-{i}"
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
            docs.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{i}"},
                         "spec": {"capacity": {"storage": "50Gi"}, "accessModes": ["ReadWriteOnce"],
                                  "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                                  "local": {"path": str(path)},
                                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}]}}}})
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

    # -- teardown helpers ------------------------------------------------------------------------
    def _delete_all_pods(self, timeout: float = 120.0) -> None:
        """With the controllers stopped nothing recreates them: kubelet stops each pod's containers
        and only then lets the API server forget the pod."""
        try:
            self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=5", "--wait=false", timeout=60)
            self._until(lambda: not self.kubectl("get", "pods", "--all-namespaces", "-o", "name", timeout=20).strip(),
                       timeout, "pods removed")
        except (RuntimeError, TimeoutError, subprocess.SubprocessError) as e:
            print(f"local-node: pods not removed cleanly: {e}", file=sys.stderr)

    def _kill_containers(self) -> None:
        for task in self._ctr("tasks", "list", "-q").stdout.split():
            self._ctr("tasks", "kill", "--signal", "SIGKILL", task)
            self._ctr("tasks", "delete", "--force", task)
        # The runc shims this containerd started name its socket in their command line.
        for pid in _pids_with_arg(str(self.containerd_sock)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _unmount_all(self) -> None:
        prefixes = (str(self.dir) + "/", str(self.run_dir) + "/")
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f]
        for point in sorted((p for p in points if p.startswith(prefixes)), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)

    # -- utilities -------------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        result = subprocess.run([str(self.bins["kubectl"]), "--kubeconfig", str(self.kubeconfig), *args],
                                input=input, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result.stdout

    def _node_ready(self) -> bool:
        try:
            node = json.loads(self.kubectl("get", "node", NODE_NAME, "-o", "json", timeout=20))
        except RuntimeError:
            return False
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen([*self.prefix, *argv], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[name] = proc
        return proc

    def _until(self, check, timeout: float, what: str, proc_name: str = "kubelet") -> None:
        """``check()`` true within ``timeout`` (then ``proc_name``'s log tail); fails at once,
        with its log, if any process of the node exits."""
        def ready():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            return check()
        try:
            wait_until(ready, timeout, what, 1, retry_on=())
        except TimeoutError as e:
            raise TimeoutError(f"{e}:\n{self.log_tail(proc_name)}") from None

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def _pids_with_arg(arg: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if arg in (entry / "cmdline").read_bytes().decode(errors="replace").split("\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def binaries() -> dict[str, Path]:
    return control_plane.binaries(K8S_BINARIES)


# -- command line: keep a node up in the foreground until interrupted ----------------------------

def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, default=ROOT / ".cache" / "e2e" / "node")
    a = p.parse_args(argv)
    missing = missing_prerequisites()
    if missing:
        print("missing: " + ", ".join(missing), file=sys.stderr)
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    node = LocalNode(a.dir, binaries(), build_images).start()
    print(f"export KUBECONFIG={node.kubeconfig}   # Ctrl-C stops the node", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
