"""What the operator may touch, without a cluster (issue 30, item 6): Secrets only its own
(owner and labels checked before any write, one field manager per kind of Secret), OdradekUsers
named like a cluster's Secret refused, internal topics refused, existing topics adopted only on
request and deleted only when made or adopted, the controller-url annotation only https to a
Service of the cluster's namespace. The API-server tests replay the attacks
(test_operator_k8s_users.py, test_operator_k8s_topics.py, test_operator_k8s_listeners.py)."""

from __future__ import annotations

import pytest

from odradek.operator import kube, principals, topics, users
from odradek.operator.settings import OperatorSettings
from odradek.operator.validation import SpecError, topic_name

NS = "data"
USER_UID, CLUSTER_UID = "uid-alice", "uid-prod"


def owned_by(uid: str, kind: str = "OdradekUser", name: str = "alice") -> list[dict]:
    return [{"apiVersion": "odradek.dev/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": True}]


def user_secret(uid: str = USER_UID, cluster: str = "prod", **data: str) -> dict:
    secret = users.build_secret("alice", NS, cluster, data)
    secret["metadata"]["ownerReferences"] = owned_by(uid)
    return secret


def live(secret: dict, rv: str = "7") -> dict:
    return {**secret, "metadata": {**secret["metadata"], "resourceVersion": rv}}


# -- Secrets -------------------------------------------------------------------------------

def test_a_secret_is_the_operators_only_with_its_owner_and_labels():
    wanted = user_secret()
    assert kube.foreign_secret(None, wanted) is None
    assert kube.foreign_secret(live(user_secret()), wanted) is None
    stranger = {"metadata": {"name": "alice", "namespace": NS, "labels": {}}}
    assert "is not owned by OdradekUser alice" in kube.foreign_secret(stranger, wanted)
    # another object's (the cluster's): same labels, another owner
    assert "is not owned by" in kube.foreign_secret(live(user_secret(CLUSTER_UID)), wanted)
    # our owner reference but not the operator's labels (or another cluster's)
    unlabelled = live(user_secret())
    unlabelled["metadata"]["labels"] = {}
    assert "lacks the operator's labels" in kube.foreign_secret(unlabelled, wanted)
    assert "lacks the operator's labels" in kube.foreign_secret(live(user_secret(cluster="other")), wanted)
    with pytest.raises(ValueError, match="adopt it before applying"):
        kube.foreign_secret(stranger, users.build_secret("alice", NS, "prod", {}))


def test_each_kind_of_secret_has_its_own_field_manager():
    digest = principals.zookeeper_secret("prod", NS, None)
    assert kube.secret_field_manager(user_secret()) == "odradek-operator-user"
    assert kube.secret_field_manager(digest) == "odradek-operator-zookeeper"
    assert len({kube.secret_field_manager(s) for s in (user_secret(), digest)}) == 2


class RecordingKube(kube.Kube):
    """``Kube`` with its REST calls recorded and the existing Secret given."""

    def __init__(self, existing: dict | None) -> None:
        super().__init__(api_client=object())
        self.existing, self.calls = existing, []

    def get(self, api_version, kind, namespace, name):
        return self.existing

    def request(self, method, path, body=None, query=None, content_type="application/json"):
        self.calls.append((method, path, body, dict(query or [])))
        return body


def test_apply_never_writes_a_foreign_secret_and_writes_its_own_under_its_rv_and_manager():
    foreign = RecordingKube({"metadata": {"name": "alice", "namespace": NS, "resourceVersion": "3",
                                          "labels": {"team": "payments"}}, "data": {"password": "dGhlaXJz"}})
    with pytest.raises(kube.SecretConflict) as refused:
        foreign.apply(user_secret(password="x"))
    assert refused.value.reason == "SecretConflict" and foreign.calls == []

    own = RecordingKube(live(user_secret(), "42"))
    own.apply(user_secret(password="x"))
    (method, path, body, query), = own.calls
    assert (method, path) == ("PATCH", f"/api/v1/namespaces/{NS}/secrets/alice")
    assert body["metadata"]["resourceVersion"] == "42"   # a precondition: no change of hands in between
    assert query == {"fieldManager": "odradek-operator-user", "force": "true"}

    fresh = RecordingKube(None)
    fresh.apply(user_secret(password="x"))
    assert "resourceVersion" not in fresh.calls[0][2]["metadata"]


# -- OdradekUser ---------------------------------------------------------------------------

def user_body(name: str = "alice") -> dict:
    return {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekUser",
            "metadata": {"name": name, "namespace": NS, "uid": USER_UID}, "spec": {}}


@pytest.mark.parametrize("name", ["prod-zookeeper-digest", "prod-cluster-ca", "prod-cluster-ca-cert",
                                  "prod-clients-ca", "prod-broker-certs", "prod-operator-certs",
                                  "other-cluster-ca", "prod-zookeeper-certs"])
def test_a_user_named_like_a_clusters_secret_is_refused(name):
    why = users.secret_conflict(user_body(name), "prod", ["prod", "other"], None)
    assert why is not None and "is named like a Secret of OdradekCluster" in why, why


def test_a_user_named_like_an_existing_secret_it_does_not_own_is_refused():
    stranger = {"metadata": {"name": "alice", "namespace": NS, "labels": {"app": "db"}}, "data": {}}
    assert "is not owned by OdradekUser alice" in users.secret_conflict(user_body(), "prod", ["prod"], stranger)
    assert users.secret_conflict(user_body(), "prod", ["prod"], live(user_secret())) is None
    assert users.secret_conflict(user_body("prod-app"), "prod", ["prod"], None) is None   # not a cluster's name


class StubKube:
    def __init__(self, secrets: dict[str, dict], clusters=("prod",)) -> None:
        self.secrets, self.clusters, self.applied = secrets, clusters, []

    def get(self, api_version, kind, namespace, name):
        return self.secrets.get(name)

    def list(self, api_version, kind, namespace, label_selector=""):
        assert kind == "OdradekCluster"
        return [{"metadata": {"name": c}} for c in self.clusters]

    def apply(self, manifest):
        self.applied.append(manifest)


class StubController:
    def __init__(self) -> None:
        self.calls = []

    def put_user(self, name, spec):
        self.calls.append(("put", name))
        return {}

    def delete_user(self, name, principal=None):
        self.calls.append(("delete", name, principal))
        return {}


def test_a_refused_user_reads_nothing_from_the_secret_and_writes_nowhere():
    stranger = {"metadata": {"name": "alice", "namespace": NS}, "data": {"password": "c2VjcmV0"}}
    k, c = StubKube({"alice": stranger}), StubController()
    body = {**user_body(), "spec": {"authentication": {"type": "scram-sha-512"}}}
    with pytest.raises(kube.SecretConflict, match="is not owned by OdradekUser alice"):
        users.sync_user(k, c, body, "prod", lambda objs: pytest.fail("adopted"), None)
    assert (k.applied, c.calls) == ([], [])


def test_deleting_a_user_removes_only_the_identity_it_made():
    c = StubController()
    assert "nothing to remove" in users.remove_user(c, "prod-cluster-ca", {})
    assert c.calls == []
    users.remove_user(c, "alice", {"username": "alice", "principal": "User:alice"})
    assert c.calls == [("delete", "alice", "User:alice")]


# -- OdradekTopic --------------------------------------------------------------------------

@pytest.mark.parametrize("name, spec", [("offsets", {"topicName": "__consumer_offsets"}),
                                        ("__transaction_state", {})])
def test_internal_topics_are_refused(name, spec):
    with pytest.raises(SpecError, match="is internal to the cluster") as refused:
        topic_name(name, spec)
    assert refused.value.reason == "InternalTopic"
    assert topic_name("mine", {"topicName": "__mine"}) == "__mine"   # not internal: an ordinary name


def test_an_existing_topic_is_adopted_only_with_the_annotation():
    current = {"name": "orders", "topic_id": "T1", "partitions": []}
    topics.check_ownership("orders", {}, {}, None)                              # absent: it creates it
    topics.check_ownership("orders", {}, {"topicId": "T1"}, current)            # its own
    with pytest.raises(SpecError, match='odradek.dev/adopt: "true"') as refused:
        topics.check_ownership("orders", {}, {}, current)
    assert refused.value.reason == "TopicNotOwned"
    with pytest.raises(SpecError):   # made again by someone else after its own was deleted: another topic
        topics.check_ownership("orders", {}, {"topicId": "T0"}, current)
    topics.check_ownership("orders", {"annotations": {topics.ADOPT_ANNOTATION: "true"}}, {}, current)
    assert topics.owned({"topicId": "T1"}, current) and not topics.owned({}, current)
    assert topics.find({"topics": [current]}, "orders") is current and topics.find({}, "x") is None


# -- the controller-url annotation ----------------------------------------------------------

@pytest.mark.parametrize("url, problem", [
    (f"https://prod-controller.{NS}.svc:8080", None),
    (f"https://10-0-0-5.prod-controller.{NS}.svc.cluster.local:8080", None),
    (f"http://prod-controller.{NS}.svc:8080", "is not https"),
    ("https://prod-controller.elsewhere.svc:8080", "is not a Service of namespace data"),
    ("https://collector.example.com/", "is not a Service of namespace data"),
    (f"https://a.b.prod-controller.{NS}.svc", "is not a Service"),
    (f"https://x@prod-controller.{NS}.svc", "carries credentials"),
    ("http://127.0.0.1:8080", "is not https"),
])
def test_controller_url_must_be_https_to_a_service_of_the_namespace(url, problem):
    got = principals.controller_url_problem(url, NS)
    assert (got is None) if problem is None else (problem in got), got


def test_trusted_origins_are_the_administrators_and_cannot_be_smuggled():
    trusted = ("http://127.0.0.1",)
    assert principals.controller_url_problem("http://127.0.0.1:9", NS, trusted) is None
    assert "carries credentials" in principals.controller_url_problem("http://127.0.0.1:80@evil.example/", NS, trusted)
    assert principals.controller_url_problem("http://127.0.0.2:9", NS, trusted) is not None
    settings = OperatorSettings.from_env({"ODRADEK_OPERATOR_TRUSTED_CONTROLLER_URLS": "http://127.0.0.1, http://[::1]"})
    assert settings.trusted_controller_urls == ("http://127.0.0.1", "http://[::1]")


def test_one_untrusted_url_voids_the_annotation():
    meta = {"namespace": NS, "annotations": {principals.CONTROLLER_URL_ANNOTATION:
                                             f"https://c-controller.{NS}.svc:8080, http://collector:80"}}
    urls, why = principals.annotated_controller_urls(meta)
    assert urls == [] and "odradek.dev/controller-url ignored" in why and "'http://collector:80' is not https" in why
    meta["annotations"][principals.CONTROLLER_URL_ANNOTATION] = f"https://c-controller.{NS}.svc:8080"
    assert principals.annotated_controller_urls(meta) == ([f"https://c-controller.{NS}.svc:8080"], None)


def test_a_password_may_not_come_from_a_secret_the_operator_makes():
    """Else a tenant who may not read the cluster's Secrets gets one copied into its own."""
    digest = principals.zookeeper_secret("prod", NS, None)
    assert "is the operator's" in users.password_source_problem("prod-zookeeper-digest", digest, ["prod"])
    assert "is the operator's" in users.password_source_problem("prod-cluster-ca", None, ["prod"])
    assert "is the operator's" in users.password_source_problem("bob", user_secret(), ["prod"])  # a user's
    mine = {"metadata": {"name": "alice-pw", "labels": {"team": "a"}}, "data": {}}
    assert users.password_source_problem("alice-pw", mine, ["prod"]) is None
    k = StubKube({"prod-cluster-ca": {"metadata": {"name": "prod-cluster-ca",
                                                   "labels": {"app.kubernetes.io/managed-by": "odradek-operator"}},
                                      "data": {"ca.key": "a2V5"}}})
    body = {**user_body(), "spec": {"authentication": {"type": "scram-sha-512", "password": {
        "valueFrom": {"secretKeyRef": {"name": "prod-cluster-ca", "key": "ca.key"}}}}}}
    with pytest.raises(kube.SecretConflict, match="must come from a Secret of your own"):
        users.sync_user(k, StubController(), body, "prod", lambda objs: pytest.fail("adopted"), None)
    assert k.applied == []
