"""schemathesis against the gateway's own /openapi.json on a real dev cluster: whatever the
generated request, no 5xx and every response matches the schema the gateway publishes.
Examples per operation are bounded (FUZZ_EXAMPLES) so the whole run stays near 1-2 minutes."""

from __future__ import annotations

import os

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

FUZZ_EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "10"))
# Long polls (records?timeout=...) are bounded by the gateway; this only guards a hang.
REQUEST_TIMEOUT_S = 60


def test_no_server_error_and_responses_match_the_schema(gw_cluster):
    schema = schemathesis.openapi.from_url(gw_cluster.gateway + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20, "the gateway publishes fewer operations than REST Proxy v2 has"
    failures, statuses = {}, []
    for operation in operations:
        try:
            _fuzz(operation, gw_cluster.gateway, statuses)
        except Exception as error:  # noqa: BLE001 - every operation's failure is reported at the end
            failures[operation.label] = str(error)[:2000]
    assert len(statuses) >= len(operations), "schemathesis sent fewer requests than operations"
    print(f"{len(statuses)} requests over {len(operations)} operations; statuses {sorted(set(statuses))}")
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def _fuzz(operation, base_url: str, statuses: list[int]) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        response = case.call_and_validate(base_url=base_url, timeout=REQUEST_TIMEOUT_S,
                                          checks=[not_a_server_error, response_schema_conformance])
        statuses.append(response.status_code)

    check()
