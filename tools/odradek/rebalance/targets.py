"""Where ``odradek rebalance`` plans and executes: the two ``Target``s, one interface.

- ``ControllerTarget`` (``--data-dir``): the active controller's rebalance routes
  (``control_plane_rebalance``); the execution lives in the controller, its state in ZooKeeper,
  so it survives this command and a controller failover (the active controller is found again
  on NOT_CONTROLLER or a refused connection).
- ``InProcessTarget`` (``--bootstrap-server``: any Kafka cluster, whose controller URL we do not
  know): the same planner (``odradek.balance.requests``) and the same executor
  (``odradek.balance.executor``) run here over Kafka's admin API (``kafka_port``); stepping it is
  this process's job, so it ends with the process (not resumable).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from odradek.balance.executor import POLL_S, Executor
from odradek.balance.requests import plan_request, proposal_view
from odradek.cluster import control_plane_rebalance as cpr
from odradek.cluster.control_plane_http import call_blocking
from odradek.errors import ErrorCode, KafkaError

TIMEOUT_S = 30.0
FIND_CONTROLLER_S = 60.0


class ControllerTarget:
    resumable = True
    interval = 1.0   # seconds between two looks at the progress

    def __init__(self, data_dir: Path) -> None:
        from odradek.dev.cluster import STATE_FILE, _control_plane_tls
        path = data_dir.resolve() / STATE_FILE
        if not path.exists():
            raise SystemExit(f"no dev cluster in {data_dir} (no {STATE_FILE}): give --bootstrap-server")
        self.state = json.loads(path.read_text())
        self.tls = _control_plane_tls(self.state)
        self.url: str | None = None

    def _call(self, request):
        """``request`` to the active controller, found again after a failover."""
        deadline = time.monotonic() + FIND_CONTROLLER_S
        while True:
            urls = ([self.url] if self.url else []) + [u for u in self.state.get("controllers", []) if u != self.url]
            for url in urls:
                try:
                    answer = call_blocking(url, request, TIMEOUT_S, self.tls)
                except OSError:
                    continue
                except KafkaError as e:
                    if e.code in (ErrorCode.not_controller, ErrorCode.request_timed_out):
                        continue
                    raise
                self.url = url
                return answer
            self.url = None
            if time.monotonic() > deadline:
                raise SystemExit("odradek rebalance: no active controller answered")
            time.sleep(1.0)

    def propose(self, req: cpr.ProposalRequest) -> cpr.ProposalView:
        return self._call(cpr.propose(req))

    def execute(self, req: cpr.ExecuteRequest) -> cpr.RebalanceStatus:
        return self._call(cpr.execute(req))

    def poll(self) -> cpr.RebalanceStatus:
        return self._call(cpr.status())

    def stop(self) -> cpr.RebalanceStatus:
        return self._call(cpr.stop())

    def close(self) -> None:
        pass


class InProcessTarget:
    resumable = False
    interval = POLL_S   # seconds between two steps

    def __init__(self, port) -> None:
        self.port = port   # a kafka_port.KafkaPort
        self.executor = Executor(self.port)
        self.loop = asyncio.new_event_loop()

    def propose(self, req: cpr.ProposalRequest) -> cpr.ProposalView:
        model = self.port.model(self.port.sizes())
        return proposal_view(plan_request(model, req, model.broker_ids()))

    def execute(self, req: cpr.ExecuteRequest) -> cpr.RebalanceStatus:
        if self.port.ongoing_now():   # as kafka-reassign-partitions refuses: replica lists are mid-move
            raise KafkaError(ErrorCode.reassignment_in_progress,
                             "reassignments are running; wait (--status) or cancel them (--stop) first")
        return self.loop.run_until_complete(self.executor.start(req))

    def poll(self) -> cpr.RebalanceStatus:
        self.loop.run_until_complete(self.executor.step())
        return self.executor.status()

    def stop(self) -> cpr.RebalanceStatus:
        return self.loop.run_until_complete(self.executor.stop())

    def close(self) -> None:
        self.loop.close()
        self.port.close()
