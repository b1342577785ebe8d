"""DescribeClientQuotas' filters (Kafka's EXACT / DEFAULT / ANY per entity type, strict)."""

from types import SimpleNamespace as C

from odradek.broker.handlers.client_quotas import ANY, EXACT, MATCH_DEFAULT, filter_error, matches

USER_BOB = (("user", "bob"),)
DEFAULT_USER = (("user", None),)
BOB_APP = (("user", "bob"), ("client-id", "app"))


def test_exact_default_and_any():
    exact = [C(entity_type="user", match_type=EXACT, match="bob")]
    default = [C(entity_type="user", match_type=MATCH_DEFAULT, match=None)]
    any_user = [C(entity_type="user", match_type=ANY, match=None)]
    assert [matches(e, exact, False) for e in (USER_BOB, DEFAULT_USER, BOB_APP)] == [True, False, True]
    assert [matches(e, default, False) for e in (USER_BOB, DEFAULT_USER, BOB_APP)] == [False, True, False]
    assert [matches(e, any_user, False) for e in (USER_BOB, DEFAULT_USER, BOB_APP)] == [True, True, True]


def test_strict_keeps_only_entities_of_exactly_the_requested_types():
    exact = [C(entity_type="user", match_type=EXACT, match="bob")]
    assert matches(USER_BOB, exact, True)
    assert not matches(BOB_APP, exact, True)
    assert not matches((("client-id", "app"),), exact, False)
