"""Under `make test` a missing test tool fails the run instead of skipping (CI must not hide it)."""

import pytest

from tests.support.tools import tool_missing


def test_missing_tool_skips_on_a_developer_machine(monkeypatch):
    monkeypatch.delenv("ODRADEK_REQUIRE_TOOLS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="kube-apiserver"):
        tool_missing("kube-apiserver could not be built")


def test_missing_tool_fails_when_the_run_requires_every_tool(monkeypatch):
    monkeypatch.setenv("ODRADEK_REQUIRE_TOOLS", "1")
    with pytest.raises(pytest.fail.Exception, match="kube-apiserver"):
        tool_missing("kube-apiserver could not be built")
