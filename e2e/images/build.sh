#!/usr/bin/env bash
# Builds the e2e node's container images without an image registry and saves each as a
# docker archive (full image names inside) that `ctr images import` (or `kind load image-archive`) takes:
#
#   base       Debian bookworm made by debootstrap (python3, pip), the stand-in for
#              python:3.11-slim-bookworm; cached, rebuilt only when missing
#   odradek    the project's Dockerfile, FROM the base (BASE_IMAGE build argument), tagged with the
#              name the chart and operator default to (ghcr.io/odradek/odradek:0.1.0)
#   odradek-git-<commit>  release N-1 (e2e/images/previous-release): its Dockerfile at that commit
#              (git archive), FROM the same base, tagged ghcr.io/odradek/odradek:git-<commit>;
#              built once per commit (a commit's image never changes); fails, saying why, when the
#              commit is not in this clone's history (a shallow clone: git fetch --unshallow)
#   connect    Apache Kafka's Connect, MirrorMaker 2 and broker (e2e/images/connect/Containerfile),
#              FROM the base: Kafka's jars from Maven Central (bench.kafka_ecosystem and
#              bench.apache_kafka: the compat suite's), a Java runtime jlink cuts from the
#              build host's JDK, tagged odradek/connect:<Kafka
#              version> like the operator's default (spec.DEFAULT_CONNECT_IMAGE); built only when
#              its inputs change (their hash is a label on the image and a stamp beside the archive)
#   zookeeper  Debian's zookeeper package plus an entrypoint with the official image's contract
#              (/docker-entrypoint.sh, ZOO_* variables), tagged zookeeper:3.8 like the operator's default
#   pause      the pod sandbox: a static Go binary FROM scratch (registry.k8s.io/pause:3.10)
#
#   e2e/images/build.sh [OUT_DIR]     default .cache/e2e/images; prints the archives' paths
#
# podman runs the builds (runc; this VM needs explicit rlimits, see FACTS). Root is required
# (debootstrap, podman's rootful storage).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-$PWD/.cache/e2e/images}"
BASE_DIR="$PWD/.cache/e2e/base"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ODRADEK_IMAGE="${ODRADEK_IMAGE:-ghcr.io/odradek/odradek:0.1.0}"
ZOOKEEPER_IMAGE="${ZOOKEEPER_IMAGE:-docker.io/library/zookeeper:3.8}"
PAUSE_IMAGE="${PAUSE_IMAGE:-registry.k8s.io/pause:3.10}"
BASE_IMAGE="localhost/odradek-e2e-base:bookworm"
mkdir -p "$OUT" "$BASE_DIR"
log() { echo "e2e-images: $*" >&2; }
build() { podman build --network host --ulimit nofile=20000:20000 --ulimit nproc=1024:1024 "$@"; }

base_image() {
  if podman image exists "$BASE_IMAGE"; then return; fi
  local tar="$BASE_DIR/rootfs.tar"
  if [ ! -s "$tar" ]; then
    log "debootstrap bookworm (python3) into $BASE_DIR/rootfs"
    rm -rf "$BASE_DIR/rootfs"
    debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
      bookworm "$BASE_DIR/rootfs" "$MIRROR" >"$BASE_DIR/debootstrap.log"
    # python:3.11-slim has no PEP 668 marker: the Dockerfile's `pip install uv` relies on that.
    rm -f "$BASE_DIR"/rootfs/usr/lib/python3*/EXTERNALLY-MANAGED
    # Trust what the build host trusts: CI machines reach PyPI through a TLS-inspecting proxy.
    cp /etc/ssl/certs/ca-certificates.crt "$BASE_DIR/rootfs/etc/ssl/certs/ca-certificates.crt"
    rm -rf "$BASE_DIR"/rootfs/var/cache/apt/archives/*.deb "$BASE_DIR"/rootfs/var/lib/apt/lists/*
    tar -C "$BASE_DIR/rootfs" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$BASE_DIR/rootfs"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$tar" "$BASE_IMAGE" >/dev/null
}

save() {  # save IMAGE NAME: one docker archive per image, written again only when the image changed
  local id archive="$OUT/$2.tar"   # (the e2e suite runs this again at its start: most images are the same)
  id="$(podman image inspect --format '{{.Id}}' "$1")"
  if [ "$(cat "$archive.id" 2>/dev/null)" != "$id" ] || [ ! -s "$archive" ]; then
    rm -f "$archive" "$archive.id"
    podman save --format docker-archive -o "$archive" "$1" && echo "$id" >"$archive.id"
  fi
  echo "$archive"
}

previous_release() {   # prints the archive of release N-1's image, building it if needed
  local commit short image archive context
  commit="$(grep -v '^#' e2e/images/previous-release | head -1)"
  short="${commit:0:7}" image="ghcr.io/odradek/odradek:git-${commit:0:7}" archive="$OUT/odradek-git-${commit:0:7}.tar"
  if ! git cat-file -e "${commit}^{commit}" 2>/dev/null; then
    log "release N-1 ($commit, e2e/images/previous-release) is not in this clone's history; the upgrade test needs its image (a shallow clone? git fetch --unshallow)"
    return 1
  fi
  if ! podman image exists "$image"; then
    log "building $image from release N-1's Dockerfile (git archive $short)"
    context="$(mktemp -d)"
    git archive "$commit" | tar -x -C "$context"
    build -q --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$image" "$context" >/dev/null
    rm -rf "$context"
    rm -f "$archive"
  fi
  if [ ! -s "$archive" ]; then
    find "$OUT" -maxdepth 1 -name 'odradek-git-*.tar' ! -name "$(basename "$archive")" -delete
    podman save --format docker-archive -o "$archive.tmp" "$image" && mv "$archive.tmp" "$archive"
  fi
  echo "$archive"
}

connect_image() {   # prints the Connect image's archive, building and saving it when its inputs changed
  local image archive inputs context
  image="$(e2e/images/connect/stage.sh --name)" archive="$OUT/connect.tar"
  inputs="$({ podman image inspect --format '{{.Id}}' "$BASE_IMAGE"; jlink --version
              ls -l "$(.venv/bin/python -m bench.kafka_ecosystem)/libs" "$(.venv/bin/python -m bench.apache_kafka resolve)/libs"
              find e2e/images/connect -type f | sort | xargs sha256sum; } | sha256sum | cut -c1-16)"
  if [ "$(podman image inspect --format '{{index .Labels "dev.odradek.inputs"}}' "$image" 2>/dev/null)" != "$inputs" ]; then
    log "building $image (Kafka's jars, a jlink runtime)"
    context="$(mktemp -d)"
    e2e/images/connect/stage.sh "$context"
    build -q --build-arg BASE_IMAGE="$BASE_IMAGE" --label "dev.odradek.inputs=$inputs" -t "$image" "$context" >/dev/null
    rm -rf "$context"
  fi
  if [ "$(cat "$archive.inputs" 2>/dev/null)" != "$inputs" ] || [ ! -s "$archive" ]; then
    rm -f "$archive" "$archive.inputs"
    podman save -q --format docker-archive -o "$archive" "$image" && echo "$inputs" >"$archive.inputs"
  fi
  echo "$archive"
}

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
base_image
previous_release
log "building $ODRADEK_IMAGE from the Dockerfile"
build -q --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$ODRADEK_IMAGE" . >/dev/null
connect_image
log "building $ZOOKEEPER_IMAGE"
build -q --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$ZOOKEEPER_IMAGE" e2e/images/zookeeper >/dev/null
log "building $PAUSE_IMAGE"
(cd e2e/images/pause && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o pause .)
build -q -t "$PAUSE_IMAGE" e2e/images/pause >/dev/null
rm -f e2e/images/pause/pause
# Each rebuild leaves the image its tag named before, and its build stage, untagged (1-2 GB a
# build): on a shared CI disk they filled it until kubelet evicted the test's pods. Dangling
# images older than this build are what no tag or container uses any more.
podman image prune -f --filter "until=$started" >/dev/null
save "$ODRADEK_IMAGE" odradek
save "$ZOOKEEPER_IMAGE" zookeeper
save "$PAUSE_IMAGE" pause
