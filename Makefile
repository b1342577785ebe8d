# The README's two commands: `make up` (a local cluster, shown working) and `make test`.
VENV := .venv/bin

.PHONY: bootstrap test-tools up down status test e2e bench

bootstrap:
	@scripts/bootstrap.sh

# What only the tests need, cached under .cache/: Apache Kafka's jars (compatibility suite),
# kube-apiserver/kubectl/helm built from the Go module proxy (operator tests; ~18 min cold), and
# the e2e suite's local node (containerd, runc, CNI from Debian; kubelet, kube-proxy, CoreDNS;
# images made with debootstrap + podman).
test-tools: bootstrap
	scripts/kafka.sh resolve || echo "WARNING: Apache Kafka could not be resolved: the compatibility suite will skip"
	scripts/k8s/build.sh || echo "WARNING: the Kubernetes binaries did not build: the operator's API-server tests will skip"
	scripts/karapace.sh || echo "WARNING: Karapace could not be installed: the gateway's Karapace parity test will skip"
	scripts/e2e_node.sh || echo "WARNING: the local e2e node could not be prepared: the e2e suite will skip"

up: bootstrap
	$(VENV)/odradek dev up --detach
	$(VENV)/python examples/quickstart.py
	@echo "\nThe cluster keeps running: 'make status', 'make down'."

down:
	$(VENV)/odradek dev down

status:
	$(VENV)/odradek dev status

test: test-tools
	$(VENV)/pytest

# Only the e2e suite (part of `make test`): a local one-node cluster, or ODRADEK_E2E_KUBECONFIG's.
e2e: test-tools
	$(VENV)/pytest e2e

bench: bootstrap
	scripts/kafka.sh resolve
	$(VENV)/python -m bench.side_by_side
