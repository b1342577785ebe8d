#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries the operator tests run against, from the Go
# module proxy, into a git-ignored cache: .cache/k8s/<version>/bin/{kube-apiserver,kubectl,
# kube-controller-manager,helm}. Only the first run pays for the build; later runs return
# at once. Installs Debian's etcd-server if no etcd is on PATH.
#
#   scripts/k8s/build.sh [binary...]     default: kube-apiserver kubectl kube-controller-manager helm
#                                        (the e2e node adds kubelet kube-scheduler kube-proxy coredns kind)
#
# `go install k8s.io/kubernetes/cmd/...@v` fails: k8s.io/kubernetes' go.mod requires its
# staging modules (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and replaces them with
# ./staging paths that a module download does not have. A small wrapper module requires
# k8s.io/kubernetes and replaces each of those v0.0.0 requirements by the published
# v0.<minor>.<patch> tag, then builds the commands as packages of a dependency.
#
# Environment: K8S_VERSION (v1.34.4), HELM_VERSION (v3.19.5), K8S_BUILD_PROCS (go build -p,
# default 1: the machines are shared and have two cores), ODRADEK_K8S_CACHE (.cache/k8s).
set -euo pipefail
cd "$(dirname "$0")/../.."

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
HELM_VERSION="${HELM_VERSION:-v3.19.5}"
PROCS="${K8S_BUILD_PROCS:-1}"
CACHE="${ODRADEK_K8S_CACHE:-$PWD/.cache/k8s}"
BIN="$CACHE/$K8S_VERSION/bin"
SRC="$CACHE/$K8S_VERSION/src"
HELM_BIN="$CACHE/helm-$HELM_VERSION/bin"
COREDNS_VERSION="${COREDNS_VERSION:-v1.12.4}"
COREDNS_BIN="$CACHE/coredns-$COREDNS_VERSION/bin"
KIND_VERSION="${KIND_VERSION:-v0.30.0}"
KIND_BIN="$CACHE/kind-$KIND_VERSION/bin"
mkdir -p "$BIN" "$SRC" "$HELM_BIN" "$COREDNS_BIN" "$KIND_BIN"

if [ $# -eq 0 ]; then
  set -- kube-apiserver kubectl kube-controller-manager helm
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { echo "k8s-build: $*" >&2; }

ensure_etcd() {
  if command -v etcd >/dev/null; then return; fi
  log "installing Debian's etcd-server (etcd 3.4.23 meets kube-apiserver's 3.4.22 minimum)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
  # The package starts a system etcd on :2379; the tests run their own on free ports.
  if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
    as_root systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
}

wrapper_module() {
  # The wrapper module, written once per version: go.mod with the replaces, a tools.go that
  # imports the commands so that `go mod tidy` records every checksum.
  # Rewritten (and re-tidied) when this script names more commands than a cached module has.
  [ -f "$SRC/go.sum" ] && grep -q kube-proxy "$SRC/tools.go" 2>/dev/null && return
  local minor="${K8S_VERSION#v1.}"
  local staging_version="v0.${minor}"
  local upstream
  upstream="$(mktemp)"
  curl -fsSL "${GOPROXY_URL:-https://proxy.golang.org}/k8s.io/kubernetes/@v/${K8S_VERSION}.mod" -o "$upstream"
  {
    echo "module odradek.dev/k8s-control-plane"
    echo
    echo "go $(awk '/^go /{print $2; exit}' "$upstream")"
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    echo "replace ("
    awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print "\t" $1 " => " $1 " '"$staging_version"'"}' "$upstream"
    echo ")"
  } > "$SRC/go.mod"
  rm -f "$upstream"
  cat > "$SRC/tools.go" <<'GO'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
  log "resolving k8s.io/kubernetes ${K8S_VERSION} with staging modules at ${staging_version}"
  (cd "$SRC" && go mod tidy -e)
}

build_k8s() {
  local name="$1"
  [ -x "$BIN/$name" ] && return
  wrapper_module
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg_version="k8s.io/component-base/version"
  local client_version="k8s.io/client-go/pkg/version"
  local ldflags="-s -w"
  for p in "$pkg_version" "$client_version"; do
    ldflags="$ldflags -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
    ldflags="$ldflags -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building $name ${K8S_VERSION} (go build -p ${PROCS})"
  local start=$SECONDS
  (cd "$SRC" && CGO_ENABLED=0 go build -p "$PROCS" -trimpath -tags providerless \
      -ldflags "$ldflags" -o "$BIN/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$BIN/$name.tmp" "$BIN/$name"
  log "built $name in $((SECONDS - start)) s"
}

build_helm() {
  [ -x "$HELM_BIN/helm" ] && return
  log "building helm ${HELM_VERSION} (go install -p ${PROCS})"
  local start=$SECONDS
  local v="${HELM_VERSION}"
  # The Kubernetes version helm assumes without a cluster (helm template, lint) comes from
  # ldflags, as helm's Makefile sets them: the minor of the client-go helm is built with.
  local k8s_minor
  # the whole go.mod first: awk's early exit would close the pipe under curl (exit 23 with pipefail)
  local helm_mod
  helm_mod="$(curl -fsSL "${GOPROXY_URL:-https://proxy.golang.org}/helm.sh/helm/v3/@v/${v}.mod")"
  k8s_minor="$(awk '$1 == "k8s.io/client-go" {split($2, p, "."); print p[2]; exit}' <<<"$helm_mod")"
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${v} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags="$ldflags -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=${k8s_minor}"
  done
  GOBIN="$HELM_BIN" CGO_ENABLED=0 go install -p "$PROCS" -trimpath -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@${v}"
  log "built helm in $((SECONDS - start)) s"
}

go_install() {  # go_install NAME PACKAGE VERSION GOBIN: a command published as a Go module
  [ -x "$4/$1" ] && return
  log "building $1 $3 (go install -p ${PROCS})"
  local start=$SECONDS
  GOBIN="$4" CGO_ENABLED=0 go install -p "$PROCS" -trimpath -ldflags "-s -w" "$2@$3"
  log "built $1 in $((SECONDS - start)) s"
}

# The e2e node's cluster DNS runs on the node, not as a pod (no image registry here): CoreDNS
# with the plugins a cluster's DNS uses, in CoreDNS's plugin.cfg order (its own main with every
# plugin, cloud DNS providers and tracing among them, was 461 s of a cold build). kind
# validates e2e/kind.yaml (it cannot create a cluster here: its node image is in a registry).
build_coredns() {
  [ -x "$COREDNS_BIN/coredns" ] && return
  local src="$CACHE/coredns-$COREDNS_VERSION/src"
  mkdir -p "$src"
  printf 'module odradek.dev/coredns\n\ngo 1.24.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > "$src/go.mod"
  cat > "$src/main.go" <<'GO'
// Command coredns: CoreDNS with the plugins a cluster's DNS uses.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{"reload", "bind", "ready", "health", "prometheus", "errors", "log",
		"loadbalance", "cache", "kubernetes", "loop", "forward"}
}

func main() { coremain.Run() }
GO
  log "building coredns $COREDNS_VERSION with a cluster's plugins (go build -p ${PROCS})"
  local start=$SECONDS
  (cd "$src" && go mod tidy -e && CGO_ENABLED=0 go build -p "$PROCS" -trimpath -ldflags "-s -w" \
      -o "$COREDNS_BIN/coredns.tmp" .)
  mv "$COREDNS_BIN/coredns.tmp" "$COREDNS_BIN/coredns"
  log "built coredns in $((SECONDS - start)) s"
}
build_kind() { go_install kind sigs.k8s.io/kind "$KIND_VERSION" "$KIND_BIN"; }

# One build at a time per cache (a test run may start while CI's build step or another
# engineer's run is building): later callers wait, then find the binaries cached.
exec 9>"$CACHE/.build.lock"
flock 9

ensure_etcd
for name in "$@"; do
  case "$name" in
    helm) build_helm ;;
    coredns) build_coredns ;;
    kind) build_kind ;;
    kube-apiserver|kubectl|kube-controller-manager|kubelet|kube-scheduler|kube-proxy) build_k8s "$name" ;;
    *) log "unknown binary: $name"; exit 2 ;;
  esac
done
for name in "$@"; do
  case "$name" in
    helm) echo "$HELM_BIN/helm" ;;
    coredns) echo "$COREDNS_BIN/coredns" ;;
    kind) echo "$KIND_BIN/kind" ;;
    *) echo "$BIN/$name" ;;
  esac
done
