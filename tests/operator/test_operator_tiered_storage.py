"""``spec.tieredStorage`` (``odradek.operator.tiered_storage``), without a cluster: the spec's checks,
the broker keys and credentials file the brokers get, the plan's Secret, the rolling hash, and the
rendered arguments and file read back by the broker's own config and storage code."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from odradek.operator import builders, cluster_plan, principals, tiered_storage
from odradek.operator.rolling import ScaleDecision
from odradek.operator.spec import SpecError
from odradek.operator.validation import parse_cluster
from tests.operator.plans import VERSIONS, children
from tests.operator.test_operator_reconcile import FakeKube, reconcile_once

NS = "data"
TIERED = {"bucket": "odradek-tiered", "endpoint": "http://s3.storage.svc:8080", "region": "eu-west-1",
          "prefix": "clusters/c/", "credentialsSecret": {"name": "s3-keys"}, "taskIntervalMs": 5000}
SPEC = {"brokers": {"config": {"retention.ms": "60000"}}, "tieredStorage": TIERED}


def user_secret(access: str = "odradek", secret: str = "s3cr3t/Key+", **keys: str) -> dict:
    data = keys or {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret + "\n"}   # echo's newline
    return {"metadata": {"name": "s3-keys"}, "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def broker_pod(raw: dict) -> dict:
    sts = next(c for c in children("c", NS, raw) if c["kind"] == "StatefulSet" and c["metadata"]["name"] == "c-brokers")
    return sts["spec"]["template"]


def settings_of(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--config")


def plan(raw: dict, secret: dict | None):
    spec = parse_cluster(raw)
    observed = cluster_plan.Observed(ScaleDecision(3, True, ""), tiered_credentials=secret)
    return spec, cluster_plan.plan_prerequisites("c", NS, spec, observed), observed


def test_the_spec_with_its_defaults():
    ts = parse_cluster({"tieredStorage": {"bucket": "segments", "credentialsSecret": {"name": "keys"}}}).tiered_storage
    assert (ts.enabled, ts.endpoint, ts.region, ts.prefix, ts.task_interval_ms) == (True, "", "us-east-1", "", 30000)
    assert (ts.credentials_secret.access_key_id_key, ts.credentials_secret.secret_access_key_key) == (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    assert parse_cluster({}).tiered_storage is None
    assert tiered_storage.active(parse_cluster({"tieredStorage": {**TIERED, "enabled": False}})) is None


@pytest.mark.parametrize("change, message", [
    ({"bucket": "Segments"}, "tieredStorage.bucket: 'Segments' is not a bucket name"),
    ({"bucket": "10.0.0.1"}, "not an IP address"),
    ({"bucket": "a..b"}, "is not a bucket name"),
    ({"endpoint": "s3.storage.svc:8080"}, "tieredStorage.endpoint: 's3.storage.svc:8080' is not an http:// or https://"),
    ({"endpoint": "ftp://s3"}, "is not an http:// or https:// URL"),
    ({"endpoint": "http://s3:99999"}, "is not an http:// or https:// URL"),
    ({"endpoint": "https://key:secret@s3.example"}, "no credentials in the URL"),
    ({"region": " "}, "tieredStorage.region: empty"),
    ({"prefix": "/clusters"}, "tieredStorage.prefix: '/clusters' starts with '/'"),
    ({"credentialsSecret": {"name": ""}}, "tieredStorage.credentialsSecret.name"),
    ({"credentialsSecret": {"name": "k", "accessKeyIdKey": "a key"}}, "credentialsSecret.accessKeyIdKey: 'a key'"),
    ({"taskIntervalMs": 0}, "tieredStorage: "),   # the registry's own range check (the CRD's minimum too)
])
def test_bad_specs_are_refused_with_the_field_and_why(change, message):
    with pytest.raises(SpecError) as e:
        parse_cluster({"tieredStorage": {**TIERED, **change}})
    assert message in str(e.value) and e.value.reason == "InvalidSpec"


def test_brokers_config_may_not_set_what_tiered_storage_sets():
    with pytest.raises(SpecError, match="brokers.config: remote.log.storage.system.enable, "
                                        "rsm.config.storage.s3.bucket.name set by spec.tieredStorage"):
        parse_cluster({"brokers": {"config": {"rsm.config.storage.s3.bucket.name": "x",
                                              "remote.log.storage.system.enable": True}}, "tieredStorage": TIERED})
    # without tieredStorage they are broker keys like any other (e.g. boto3's chain on the nodes' role)
    assert parse_cluster({"brokers": {"config": {"remote.log.storage.system.enable": True}}}).brokers.config == {
        "remote.log.storage.system.enable": "true"}


def test_the_brokers_get_the_keys_and_the_credentials_file():
    pod = broker_pod(SPEC)
    container = pod["spec"]["containers"][0]
    settings = settings_of(container["args"])
    assert {k: settings[k] for k in tiered_storage.KEYS} == {
        "remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "5000",
        "rsm.config.storage.s3.endpoint.url": "http://s3.storage.svc:8080",
        "rsm.config.storage.s3.bucket.name": "odradek-tiered", "rsm.config.storage.s3.region": "eu-west-1",
        "rsm.config.storage.key.prefix": "clusters/c/",
        "rsm.config.storage.aws.credentials.file": "/etc/odradek/tiered-storage/credentials"}
    assert settings["retention.ms"] == "60000"
    assert {"name": "tiered-storage", "secret": {"secretName": "c-tiered-storage"}} in pod["spec"]["volumes"]
    assert {"name": "tiered-storage", "mountPath": "/etc/odradek/tiered-storage", "readOnly": True} in \
        container["volumeMounts"]


def test_without_a_secret_or_when_disabled():
    chain = broker_pod({"tieredStorage": {"bucket": "segments"}})   # boto3's chain: no file, no volume
    settings = settings_of(chain["spec"]["containers"][0]["args"])
    assert settings["remote.log.storage.system.enable"] == "true"
    assert not {"rsm.config.storage.aws.credentials.file", "rsm.config.storage.s3.endpoint.url"} & set(settings)
    assert all(v["name"] != "tiered-storage" for v in chain["spec"]["volumes"])
    off = broker_pod({"tieredStorage": {**TIERED, "enabled": False}})
    assert off == broker_pod({})   # same arguments, volumes and hashes as a cluster without it


def test_the_plan_writes_the_credentials_file_from_the_users_secret():
    spec, first, _ = plan(SPEC, user_secret())
    (secret,) = [s for s in first.secrets if s["metadata"]["name"] == "c-tiered-storage"]
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "tiered-storage"
    assert base64.b64decode(secret["data"]["credentials"]).decode() == (
        "[default]\naws_access_key_id = odradek\naws_secret_access_key = s3cr3t/Key+\n")
    assert "c-tiered-storage" in principals.cluster_secret_names("c")   # no OdradekUser may take its name
    _, renamed, _ = plan({"tieredStorage": {**TIERED, "credentialsSecret": {
        "name": "s3-keys", "accessKeyIdKey": "id", "secretAccessKeyKey": "key"}}}, user_secret(id="a", key="b"))
    assert b"aws_access_key_id = a\n" in base64.b64decode(renamed.secrets[0]["data"]["credentials"])
    _, none, _ = plan({"tieredStorage": {"bucket": "segments"}}, None)
    assert all(s["metadata"]["name"] != "c-tiered-storage" for s in none.secrets)


@pytest.mark.parametrize("secret, message", [
    (None, "tieredStorage.credentialsSecret: Secret s3-keys does not exist"),
    (user_secret(AWS_ACCESS_KEY_ID="a"), "Secret s3-keys has no key 'AWS_SECRET_ACCESS_KEY' (secretAccessKeyKey)"),
    (user_secret(AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b\nc"), "key 'AWS_SECRET_ACCESS_KEY' spans lines"),
])
def test_a_missing_secret_or_key_is_reported_and_retried(secret, message):
    with pytest.raises(tiered_storage.CredentialsMissing) as e:
        plan(SPEC, secret)
    assert message in str(e.value) and e.value.reason == "TieredStorageCredentialsMissing"


def test_the_reconcile_writes_the_file_before_the_brokers_and_nothing_without_it():
    kube = FakeKube()
    with pytest.raises(tiered_storage.CredentialsMissing):   # the handler: status, then a retry
        reconcile_once(kube, SPEC)
    assert not kube.applied
    kube.objects[("Secret", "s3-keys")] = user_secret()
    reconcile_once(kube, SPEC)
    order = [(o["kind"], o["metadata"]["name"]) for o in kube.applied]
    assert order.index(("Secret", "c-tiered-storage")) < order.index(("StatefulSet", "c-brokers"))


def test_a_change_or_a_rotated_key_rolls_the_brokers():
    def revision(raw, secret):
        spec, _, observed = plan(raw, secret)
        children = cluster_plan.plan_children("c", NS, spec, observed, VERSIONS, {})
        sts = next(c for c in children.children if c["kind"] == "StatefulSet" and c["metadata"]["name"] == "c-brokers")
        return sts["spec"]["template"]["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION], children.security

    base, security = revision(SPEC, user_secret())
    assert security.tiered_credentials == tiered_storage.credentials_version(parse_cluster(SPEC), user_secret())
    assert revision(SPEC, user_secret())[0] == base
    assert revision(SPEC, user_secret(secret="rotated"))[0] != base
    assert revision({**SPEC, "tieredStorage": {**TIERED, "bucket": "other"}}, user_secret())[0] != base
    assert revision({**SPEC, "tieredStorage": {**TIERED, "enabled": False}}, None)[0] == \
        builders.config_hash("c", NS, parse_cluster({"brokers": SPEC["brokers"]}))   # off: the hash it had


def test_the_status_timer_sees_a_rotated_key():
    """Secrets are not watched: the timer compares the user's Secret with the brokers' file."""
    from odradek.operator import reconcile
    kube = FakeKube()
    kube.objects[("Secret", "s3-keys")] = user_secret()
    reconcile_once(kube, SPEC)
    spec = parse_cluster(SPEC)
    assert reconcile.tiered_credentials_rotated(kube, "c", NS, spec) is None
    kube.objects[("Secret", "s3-keys")] = user_secret(secret="rotated")
    assert reconcile.tiered_credentials_rotated(kube, "c", NS, spec) == "s3-keys"
    reconcile_once(kube, SPEC)   # what the annotation's change runs: the file rewritten
    assert reconcile.tiered_credentials_rotated(kube, "c", NS, spec) is None
    written = kube.get("v1", "Secret", NS, "c-tiered-storage")
    assert not tiered_storage.rotated(spec, None, written)   # missing: the reconcile reports it
    assert not tiered_storage.rotated(spec, user_secret(AWS_ACCESS_KEY_ID="a"), written)
    assert reconcile.tiered_credentials_rotated(kube, "c", NS, parse_cluster({})) is None


def test_the_broker_reads_the_rendered_keys_and_file(tmp_path):
    """What the pod's broker does with them: its config registry binds the keys, its remote log
    manager's ``storage_config`` reads the mounted file (here at a temporary path)."""
    from odradek.broker.config import BrokerConfig
    from odradek.broker.storage.remote_log_manager import storage_config
    from odradek.config import bound_values, parse_broker_settings
    _, first, _ = plan(SPEC, user_secret())
    file = tmp_path / "credentials"
    file.write_bytes(base64.b64decode(first.secrets[0]["data"]["credentials"]))
    settings = {k: v for k, v in settings_of(broker_pod(SPEC)["spec"]["containers"][0]["args"]).items()
                if k in tiered_storage.KEYS or k == "retention.ms"}
    settings["rsm.config.storage.aws.credentials.file"] = str(file)
    config = BrokerConfig(broker_id=0, data_dir=tmp_path, zookeeper="zk:2181",
                          **bound_values(BrokerConfig, parse_broker_settings(settings).broker))
    assert config.remote_log_storage_system_enable and config.remote_log_manager_task_interval_ms == 5000
    store = storage_config(config)
    assert dataclasses.astuple(store)[:6] == ("http://s3.storage.svc:8080", "odradek-tiered", "odradek", "s3cr3t/Key+",
                                              "eu-west-1", "clusters/c/")
