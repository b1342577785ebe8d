"""schemathesis against the gateway's own /openapi.json on a real dev cluster: whatever the
generated request, no 5xx and every response matches the schema the gateway publishes.
Examples per operation are bounded (FUZZ_EXAMPLES) so the whole run stays near 1-2 minutes."""

from __future__ import annotations

import os

import schemathesis
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import booleans
from schemathesis.checks import not_a_server_error, response_schema_conformance

FUZZ_EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "10"))
# Long polls (records?timeout=...) are bounded by the gateway; this only guards a hang.
REQUEST_TIMEOUT_S = 60


def test_no_server_error_and_responses_match_the_schema(gw_cluster):
    schema = schemathesis.openapi.from_url(gw_cluster.gateway + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20, "the gateway publishes fewer operations than REST Proxy v2 has"
    failures, statuses = {}, []
    cluster_id = httpx.get(gw_cluster.gateway + "/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]
    for operation in operations:
        try:
            _fuzz(operation, gw_cluster.gateway, statuses, cluster_id)
        except Exception as error:  # noqa: BLE001 - every operation's failure is reported at the end
            failures[operation.label] = str(error)[:2000]
    assert len(statuses) >= len(operations), "schemathesis sent fewer requests than operations"
    print(f"{len(statuses)} requests over {len(operations)} operations; statuses {sorted(set(statuses))}")
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def _fuzz(operation, base_url: str, statuses: list[int], cluster_id: str) -> None:
    @given(case=operation.as_strategy(), real_cluster=booleans())
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case, real_cluster):
        # v3 reads and group changes: half the requests name the real cluster, so they reach the
        # handlers' Kafka calls (not topic creation: thousands of partitions on a shared CI machine)
        if real_cluster and "cluster_id" in (case.path_parameters or {}) and (
                case.method == "GET" or "/consumer-groups/" in case.path):
            case.path_parameters["cluster_id"] = cluster_id
        response = case.call_and_validate(base_url=base_url, timeout=REQUEST_TIMEOUT_S,
                                          checks=[not_a_server_error, response_schema_conformance])
        statuses.append(response.status_code)

    check()
