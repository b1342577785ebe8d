# One image for every part of Odradek: broker, controller, gateway, operator, the produce/consume
# CLI and the Spark data source's client side (pyarrow, httpx; Spark itself runs from Spark's
# image with the data source as --py-files, see docs/spark.md). Entrypoint: the `odradek`
# command — `odradek broker ...`, `odradek controller ...`, `odradek gateway ...`,
# `odradek operator ...`. ZooKeeper runs from the official `zookeeper` image.
#
#   docker build -t ghcr.io/odradek/odradek:0.1.0 .
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm ...
#
# The install is the one `scripts/bootstrap.sh` and CI use — uv from PyPI, then
# `uv sync --frozen` of uv.lock — except that only the `operator` and `gateway` extras are
# installed (not test, bench, or spark, which is pyspark itself) and the project goes in as a wheel (`--no-editable`), so the final
# stage needs nothing but the virtualenv. (No Docker engine on the development machines: this
# file is checked by reading, not by building; see docs/kubernetes.md.)
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# UV_NATIVE_TLS: trust the image's CA store (builds behind a TLS-inspecting proxy add its CA there).
ENV UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/opt/odradek UV_NATIVE_TLS=1
RUN python3 -m pip install --no-cache-dir uv
WORKDIR /src
# Dependencies first (a layer that changes only with the lock file).
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --extra operator --extra gateway --no-install-project
# Then the project itself: every folder the wheel is built from (pyproject's hatch packages).
COPY lib/ lib/
COPY tools/ tools/
COPY services/ services/
COPY clients/ clients/
COPY operator/ operator/
RUN uv sync --frozen --no-dev --extra operator --extra gateway --no-editable \
 && /opt/odradek/bin/odradek --help >/dev/null \
 && /opt/odradek/bin/python -c "import odradek.broker.server, odradek.controller.service, odradek.operator.handlers, odradek.gateway.app, odradek.client"

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="odradek" \
      org.opencontainers.image.description="Kafka-style distributed log for Kubernetes: broker, controller, gateway, operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 odradek \
 && useradd --system --uid 10001 --gid odradek --home-dir /var/lib/odradek --create-home odradek \
 && mkdir -p /var/lib/odradek/data && chown -R 10001:10001 /var/lib/odradek
COPY --from=build /opt/odradek /opt/odradek
ENV PATH=/opt/odradek/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/odradek
# 9092 Kafka listener, 9093 broker control plane, 8080 controller API / operator health,
# 8000 gateway (the operator's choice; the gateway's own default is 8080).
EXPOSE 9092 9093 8080 8000
ENTRYPOINT ["odradek"]
CMD ["--help"]
