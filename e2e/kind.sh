#!/usr/bin/env bash
# The e2e suite on a kind cluster, for machines with Docker (CI runs the same suite on a local
# node instead: e2e/local_node.py). Creates the cluster, builds the image from the Dockerfile,
# loads it into the node, runs the suite, deletes the cluster (KEEP_CLUSTER=1 keeps it).
#
#   e2e/kind.sh [pytest args...]
#
# Needs docker, kind, kubectl and helm on PATH (scripts/k8s/build.sh builds kubectl and helm),
# and a Linux Docker host: the tests reach the gateway's NodePort at the node container's IP.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${KIND_CLUSTER_NAME:-odradek-e2e}"
IMAGE="${ODRADEK_IMAGE:-ghcr.io/odradek/odradek:0.1.0}"
KUBECONFIG_FILE="$(mktemp -t odradek-kind-XXXXXX.kubeconfig)"

cleanup() {
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -f "$KUBECONFIG_FILE"
  else
    echo "kept: export KUBECONFIG=$KUBECONFIG_FILE" >&2
  fi
}
trap cleanup EXIT

kind create cluster --name "$CLUSTER" --config e2e/kind.yaml --kubeconfig "$KUBECONFIG_FILE" --wait 120s
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"
# Release N-1 (the suite installs the cluster with it and upgrades it): its Dockerfile at that commit.
previous="$(grep -v '^#' e2e/images/previous-release | head -1)"
git cat-file -e "${previous}^{commit}" || { echo "release N-1 $previous is not in this clone's history" >&2; exit 1; }
git archive "$previous" | docker build -t "ghcr.io/odradek/odradek:git-${previous:0:7}" -
kind load docker-image "ghcr.io/odradek/odradek:git-${previous:0:7}" --name "$CLUSTER"
# Kafka Connect's and MirrorMaker's image (e2e/test_connect_pods.py): the base is Debian's own image here
# (the JDK jlink cuts the runtime from must be built for bookworm's glibc or an older one).
connect_context="$(mktemp -d)"
connect_image="$(e2e/images/connect/stage.sh --name)"
e2e/images/connect/stage.sh "$connect_context"
docker build --build-arg BASE_IMAGE=debian:bookworm-slim -t "$connect_image" "$connect_context"
rm -rf "$connect_context"
kind load docker-image "$connect_image" --name "$CLUSTER"
# ZooKeeper (zookeeper:3.8) is pulled by the node from Docker Hub.
ODRADEK_E2E_KUBECONFIG="$KUBECONFIG_FILE" .venv/bin/pytest e2e "$@"
