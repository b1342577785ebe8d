"""The operator's settings, read from its environment once, at start-up (``odradek operator``).

``OperatorSettings.from_env`` is the only place the operator reads environment variables;
the CLI builds one and registers the kopf handlers with it (``handlers.register``), which pass
it down to ``reconcile``. Immutable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

STATUS_INTERVAL_ENV = "ODRADEK_OPERATOR_STATUS_INTERVAL"
DRIFT_INTERVAL_ENV = "ODRADEK_OPERATOR_DRIFT_INTERVAL"
RETRY_DELAY_ENV = "ODRADEK_OPERATOR_RETRY_DELAY"
MIRROR_LAG_INTERVAL_ENV = "ODRADEK_OPERATOR_MIRROR_LAG_INTERVAL"
CONTROLLER_URL_ENV = "ODRADEK_OPERATOR_CONTROLLER_URL"
RACK_CLUSTERROLE_ENV = "ODRADEK_OPERATOR_RACK_CLUSTERROLE"
TRUSTED_CONTROLLER_URLS_ENV = "ODRADEK_OPERATOR_TRUSTED_CONTROLLER_URLS"
WEBHOOK_LISTEN_ENV = "ODRADEK_OPERATOR_WEBHOOK_LISTEN"   # the eviction webhook (webhook.py, evictions.py)
WEBHOOK_HOSTS_ENV = "ODRADEK_OPERATOR_WEBHOOK_HOSTS"
WEBHOOK_SECRET_ENV = "ODRADEK_OPERATOR_WEBHOOK_SECRET"
WEBHOOK_CONFIGURATION_ENV = "ODRADEK_OPERATOR_WEBHOOK_CONFIGURATION"


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    status_interval: float = 15.0   # s between cluster status refreshes
    drift_interval: float = 60.0    # s between topic drift checks
    retry_delay: float = 10.0       # s before retrying a handler that waits or failed
    mirror_lag_interval: float = 30.0  # s between MirrorMaker 2 lag checks (on the status timer)
    controller_urls: tuple[str, ...] = ()  # override of the controller Service's endpoints
    # The ClusterRole (nodes get) rack-aware brokers are bound to, set by the chart
    # (rbac.brokerRack); empty: the chart grants no node access.
    rack_cluster_role: str = "odradek-broker-rack"
    # scheme://host origins the controller-url annotation may name besides https Services of the
    # cluster's namespace (principals.controller_url_problem): development only.
    trusted_controller_urls: tuple[str, ...] = ()
    # The eviction webhook: host:port to serve it on ("": off), the names its certificate
    # carries, the Secret (namespace/name) keeping it, the ValidatingWebhookConfiguration to trust it.
    webhook_listen: str = ""
    webhook_hosts: tuple[str, ...] = ()
    webhook_secret: str = ""
    webhook_configuration: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "OperatorSettings":
        env, default = (os.environ if env is None else env), cls()
        urls = env.get(CONTROLLER_URL_ENV, "").strip()
        return cls(status_interval=float(env.get(STATUS_INTERVAL_ENV, default.status_interval)),
                   drift_interval=float(env.get(DRIFT_INTERVAL_ENV, default.drift_interval)),
                   retry_delay=float(env.get(RETRY_DELAY_ENV, default.retry_delay)),
                   mirror_lag_interval=float(env.get(MIRROR_LAG_INTERVAL_ENV, default.mirror_lag_interval)),
                   controller_urls=tuple(u.strip().rstrip("/") for u in urls.split(",") if u.strip()),
                   rack_cluster_role=env.get(RACK_CLUSTERROLE_ENV, default.rack_cluster_role),
                   trusted_controller_urls=tuple(u.strip() for u in env.get(TRUSTED_CONTROLLER_URLS_ENV, "").split(",")
                                                 if u.strip()),
                   webhook_listen=env.get(WEBHOOK_LISTEN_ENV, ""),
                   webhook_hosts=tuple(h.strip() for h in env.get(WEBHOOK_HOSTS_ENV, "").split(",") if h.strip()),
                   webhook_secret=env.get(WEBHOOK_SECRET_ENV, ""),
                   webhook_configuration=env.get(WEBHOOK_CONFIGURATION_ENV, ""))
