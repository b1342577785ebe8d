# The README's two commands: `make up` (a local cluster, shown working) and `make test`.
VENV := .venv/bin

.PHONY: bootstrap up down status test bench

bootstrap:
	@scripts/bootstrap.sh

up: bootstrap
	$(VENV)/odradek dev up --detach
	$(VENV)/python examples/quickstart.py
	@echo "\nThe cluster keeps running: 'make status', 'make down'."

down:
	$(VENV)/odradek dev down

status:
	$(VENV)/odradek dev status

test: bootstrap
	$(VENV)/pytest

bench: bootstrap
	scripts/kafka.sh resolve
	$(VENV)/python -m bench.side_by_side
