#!/usr/bin/env bash
# What the e2e suite's local node needs (e2e/local_node.py), installed and built once:
# Debian's containerd, runc, CNI plugins, debootstrap, podman, iptables, conntrack and
# ShellCheck (for the kind script); the Kubernetes node binaries (kubelet, kube-proxy,
# kube-scheduler, CoreDNS, and kind to validate its config) from the Go module
# proxy into .cache/k8s; the images (e2e/images/build.sh) into .cache/e2e/images.
# Root only (containerd and the kubelet run as root); elsewhere it says why and does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "e2e-node: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "not root: the local e2e node cannot run here (e2e/kind.sh runs the suite on kind)"
  exit 1
fi
packages=(containerd runc containernetworking-plugins debootstrap podman iptables conntrack shellcheck)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packages' own services are not wanted: the node runs its containerd on a private socket.
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
scripts/k8s/build.sh kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl helm coredns kind >/dev/null
e2e/images/build.sh >/dev/null
log "ready: .venv/bin/pytest e2e"
