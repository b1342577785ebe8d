"""The pure manifest builders: every child of an OdradekCluster, without a cluster."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from odradek.cluster import control_plane
from odradek.operator import builders, certs, cluster_plan
from odradek.operator.security import PodSecurity
from odradek.operator.spec import DEFAULT_ZOOKEEPER_IMAGE
from tests.operator.plans import children as planned, cluster_spec, probe_paths, security

NS = "data"


def by_kind(children, kind, name=None):
    found = [c for c in children if c["kind"] == kind and (name is None or c["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''}"
    return found[0] if name else found


def gateway(raw):
    spec = cluster_spec(raw)
    return builders.build_gateway("c", NS, spec, security(spec))


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def test_default_spec_builds_managed_zookeeper_controller_brokers_and_no_gateway():
    children = planned("prod", NS, {})
    kinds = [(c["kind"], c["metadata"]["name"]) for c in children]
    assert kinds == [
        ("ConfigMap", "prod-config"),
        ("ConfigMap", "prod-zookeeper-config"), ("Service", "prod-zookeeper-headless"), ("Service", "prod-zookeeper"),
        ("StatefulSet", "prod-zookeeper"), ("Service", "prod-controller"), ("Deployment", "prod-controller"),
        ("Service", "prod-brokers"), ("Service", "prod-bootstrap"),
        ("PodDisruptionBudget", "prod-brokers"), ("StatefulSet", "prod-brokers"),
    ]
    for c in children:
        assert c["metadata"]["namespace"] == NS
        assert c["metadata"]["labels"]["odradek.dev/cluster"] == "prod"
        assert c["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "odradek-operator"


def test_brokers_statefulset_advertises_stable_dns_names_and_keeps_claims():
    spec = {"brokers": {"replicas": 5, "storage": {"size": "50Gi", "class": "fast"},
                        "config": {"retention.ms": 60000, "min.insync.replicas": "2"},
                        "resources": {"requests": {"cpu": "1"}}}}
    sts = by_kind(planned("prod", NS, spec), "StatefulSet", "prod-brokers")
    s = sts["spec"]
    assert s["replicas"] == 5 and s["serviceName"] == "prod-brokers"
    assert s["updateStrategy"] == {"type": "OnDelete"}
    assert s["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    claim = s["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    c = container(sts)
    args = c["args"]
    assert args[:3] == ["broker", "--id", "$(BROKER_ID)"]
    assert args[args.index("--advertised") + 1] == "$(POD_NAME).prod-brokers.$(POD_NAMESPACE).svc:9092"
    # The controller reaches each broker's control-plane API at its stable name, not 0.0.0.0.
    assert args[args.index("--internal-advertised") + 1] == "$(POD_NAME).prod-brokers.$(POD_NAMESPACE).svc:9093"
    assert args[args.index("--zookeeper") + 1] == "$(ODRADEK_ZOOKEEPER)"
    configs = [args[i + 1] for i, a in enumerate(args) if a == "--config"]
    # the spec's settings, then the pod's security (control-plane mutual TLS, ZooKeeper ACLs and TLS)
    assert configs[:3] == ["metrics.port=9404", "min.insync.replicas=2", "retention.ms=60000"]
    assert [c.split("=")[0] for c in configs[3:]] == [
        "control.plane.ssl.keystore.location", "control.plane.ssl.truststore.location",
        "control.plane.ssl.endpoint.identification.algorithm", "control.plane.ssl.peer.common.name.pattern",
        "zookeeper.digest.credentials.file", "zookeeper.set.acl", "zookeeper.ssl.client.enable",
        "zookeeper.ssl.keystore.location", "zookeeper.ssl.truststore.location",
        "zookeeper.ssl.endpoint.identification.algorithm"]
    assert {"name": "metrics", "containerPort": 9404} in c["ports"]  # the chart's PodMonitor scrapes it
    env = {e["name"]: e for e in c["env"]}
    assert env["BROKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert env["ODRADEK_ZOOKEEPER"]["valueFrom"]["configMapKeyRef"] == {"name": "prod-config", "key": "zookeeper.connect"}
    assert c["resources"] == {"requests": {"cpu": "1"}}
    assert [(m["name"], m["mountPath"]) for m in c["volumeMounts"]] == [
        ("data", builders.DATA_DIR), ("cluster-ca", "/etc/odradek/certs/cluster-ca"),
        ("broker-certs", "/etc/odradek/certs/broker"), ("zookeeper-digest", "/etc/odradek/zookeeper"),
        ("writable-tmp", "/tmp")]
    # ready when serving and in every ISR it belongs to (the status route on an image without that
    # route), asked with the pod's own certificate (the kubelet has none)
    assert c["readinessProbe"]["exec"]["command"][:3] == ["odradek", "operator", "probe"]
    assert probe_paths(c) == [control_plane.READY.path(), control_plane.STATUS.path()]
    assert (c["readinessProbe"]["periodSeconds"], c["readinessProbe"]["failureThreshold"]) == (10, 3)
    assert sts["spec"]["template"]["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION]


def test_a_control_plane_without_mutual_tls_is_probed_with_http_get():
    spec = cluster_spec({})
    plain = dataclasses.replace(security(spec), broker=PodSecurity(), controller=PodSecurity())
    timings = {"periodSeconds": 10, "timeoutSeconds": 8, "failureThreshold": 3}
    sts = by_kind(builders.build_brokers("c", NS, spec, plain), "StatefulSet", "c-brokers")
    assert container(sts)["readinessProbe"] == {"httpGet": {"path": "/internal/v1/ready", "port": 9093}, **timings}
    dep = by_kind(builders.build_controller("c", NS, spec, plain), "Deployment", "c-controller")
    assert container(dep)["readinessProbe"] == {"httpGet": {"path": "/internal/v1/health", "port": 8080}, **timings}


def test_broker_address_matches_the_advertised_pattern():
    assert builders.broker_address("prod", NS, 2) == "prod-brokers-2.prod-brokers.data.svc:9092"


def test_ephemeral_storage_uses_empty_dir_and_delete_claim_deletes():
    sts = by_kind(planned("c", NS, {"brokers": {"storage": {"type": "ephemeral"}}}),
                  "StatefulSet", "c-brokers")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert sts["spec"]["template"]["spec"]["volumes"][0] == {"name": "data", "emptyDir": {}}
    assert [v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]] == [
        "data", "cluster-ca", "broker-certs", "zookeeper-digest", "writable-tmp"]
    sts = by_kind(planned("c", NS, {"brokers": {"storage": {"deleteClaim": True}}}),
                  "StatefulSet", "c-brokers")
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"


def test_headless_service_pdb_and_bootstrap():
    children = planned("c", NS, {})
    headless = by_kind(children, "Service", "c-brokers")
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert by_kind(children, "Service", "c-bootstrap")["spec"]["ports"] == [{"name": "kafka", "port": 9092}]
    pdb = by_kind(children, "PodDisruptionBudget", "c-brokers")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == builders.selector("c", "broker")
    cm = by_kind(children, "ConfigMap", "c-config")
    assert cm["data"]["zookeeper.connect"] == "c-zookeeper.data.svc:2181"
    assert by_kind(children, "Service", "c-zookeeper")["spec"]["publishNotReadyAddresses"] is True
    assert cm["data"]["bootstrap.servers"] == "c-bootstrap.data.svc:9092"


def test_external_zookeeper_builds_no_ensemble():
    spec = {"zookeeper": {"external": {"connect": "zk-0.zk:2181,zk-1.zk:2181"}}}
    children = planned("c", NS, spec)
    assert not [c for c in children if "zookeeper" in c["metadata"]["name"]]
    assert by_kind(children, "ConfigMap", "c-config")["data"]["zookeeper.connect"] == "zk-0.zk:2181,zk-1.zk:2181"


def _zoo_cfg(children: list[dict]) -> dict[str, str]:
    text = by_kind(children, "ConfigMap", "c-zookeeper-config")["data"]["zoo.cfg"]
    return dict(line.split("=", 1) for line in text.splitlines())


def test_managed_zookeeper_ensemble():
    spec = {"zookeeper": {"managed": {"replicas": 3, "storage": {"size": "2Gi"}}}}
    children = planned("c", NS, spec)
    sts = by_kind(children, "StatefulSet", "c-zookeeper")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["serviceName"] == "c-zookeeper-headless"
    cfg = _zoo_cfg(children)
    assert [f"server.{i}={cfg[f'server.{i}']}" for i in (1, 2, 3)] == [   # no ";2181": no plaintext client port
        f"server.{i + 1}=c-zookeeper-{i}.c-zookeeper-headless.data.svc:2888:3888" for i in range(3)]
    assert cfg["standaloneEnabled"] == "false" and cfg["dataDir"] == "/data"
    assert "dataLogDir" not in cfg   # the transaction log on the claim with the snapshots, not on an emptyDir
    assert {"name": "data", "mountPath": "/data"} in container(sts)["volumeMounts"]
    assert container(sts)["command"][-1].endswith("zkServer.sh start-foreground /etc/odradek/zookeeper-config/zoo.cfg")
    assert container(sts)["image"] == DEFAULT_ZOOKEEPER_IMAGE
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_managed_zookeeper_serves_tls_only_with_the_cluster_ca():
    """Strimzi's ZooKeeper: TLS client port only, client certificates from the cluster CA
    required, quorum TLS; its own certificate mounted, the brokers and the controller
    connecting with theirs (Kafka's zookeeper.ssl.*)."""
    children = planned("c", NS, {"zookeeper": {"managed": {"replicas": 3}}})
    cfg = _zoo_cfg(children)
    assert "clientPort" not in cfg and cfg["secureClientPort"] == "2181"
    assert cfg["serverCnxnFactory"] == "org.apache.zookeeper.server.NettyServerCnxnFactory"
    keystore, truststore = certs.keystore_file("zookeeper"), certs.cluster_ca_file()
    for prefix in ("ssl", "ssl.quorum"):
        assert {k: cfg[f"{prefix}.{k}"] for k in ("keyStore.location", "keyStore.type", "trustStore.location",
                                                  "trustStore.type", "clientAuth")} == {
            "keyStore.location": keystore, "keyStore.type": "PEM", "trustStore.location": truststore,
            "trustStore.type": "PEM", "clientAuth": "need"}, prefix
    assert cfg["sslQuorum"] == "true" and cfg["portUnification"] == "false"
    sts = by_kind(children, "StatefulSet", "c-zookeeper")
    pod = sts["spec"]["template"]
    assert {v["name"]: v for v in pod["spec"]["volumes"]}["zookeeper-certs"]["secret"]["secretName"] == \
        "c-zookeeper-certs"
    assert {m["mountPath"] for m in container(sts)["volumeMounts"]} >= {
        "/etc/odradek/certs/zookeeper", "/etc/odradek/certs/cluster-ca", "/etc/odradek/zookeeper-config"}
    assert pod["metadata"]["annotations"][certs.CERTS_ANNOTATION] == "zookeeper-v1"
    assert pod["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION]
    for name, kind, component in (("c-brokers", "StatefulSet", "broker"), ("c-controller", "Deployment", "controller")):
        obj = by_kind(children, kind, name)
        words = " ".join(container(obj).get("args") or container(obj)["command"])
        for setting in ("zookeeper.ssl.client.enable=true", f"zookeeper.ssl.keystore.location={certs.keystore_file(component)}",
                        f"zookeeper.ssl.truststore.location={truststore}",
                        "zookeeper.ssl.endpoint.identification.algorithm=HTTPS"):
            assert setting in words, (name, setting)


def test_external_zookeeper_is_reached_as_configured():
    """An external ensemble is the user's: no zookeeper.ssl.* (its TLS is not the cluster CA's)."""
    children = planned("c", NS, {"zookeeper": {"external": {"connect": "zk:2181"}}})
    args = container(by_kind(children, "StatefulSet", "c-brokers"))["args"]
    assert not [a for a in args if a.startswith("zookeeper.ssl.")]


def test_controller_deployment_advertises_its_dns_name():
    children = planned("c", NS, {"controller": {"replicas": 3}, "image": "reg/odradek:1"})
    dep = by_kind(children, "Deployment", "c-controller")
    assert dep["spec"]["replicas"] == 3
    c = container(dep)
    assert c["image"] == "reg/odradek:1"
    assert "args" not in c   # sh -c makes its advertised name from $POD_IP (test_operator_principals runs it)
    shell, flag, script = c["command"]
    assert (shell, flag) == ("sh", "-c") and script.startswith("exec odradek controller ")
    assert script.endswith(' --advertised-url "https://$(printf %s "$POD_IP" | tr .: --)'
                           '.c-controller.$POD_NAMESPACE.svc:8080"')
    assert " --metrics-port 9404 " in script
    assert dep["spec"]["template"]["metadata"]["annotations"] == {"odradek.dev/certificates-hash": "controller-v1"}
    assert c["readinessProbe"]["exec"]["command"][:3] == ["odradek", "operator", "probe"]
    assert probe_paths(c) == [control_plane.HEALTH.path()]
    assert {"name": "metrics", "containerPort": 9404} in c["ports"]
    assert by_kind(children, "Service", "c-controller")["spec"]["clusterIP"] == "None"


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_gateway_only_when_replicas_positive():
    assert not gateway({"gateway": {"replicas": 0}})
    assert not gateway({})
    svc, pods, dep = gateway({"gateway": {"replicas": 2, "serviceType": "LoadBalancer",
                                                            "authSecret": "gw-auth"}})
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["sessionAffinity"] == "ClientIP"    # a client's consumer instances live in one replica
    assert dep["spec"]["replicas"] == 2
    assert pods["metadata"]["name"] == "c-gateway-pods" and pods["spec"]["clusterIP"] == "None"
    assert pods["spec"]["selector"] == svc["spec"]["selector"]
    assert dep["spec"]["template"]["spec"]["volumes"][0] == {"name": "auth", "secret": {"secretName": "gw-auth"}}
    gw = container(dep)
    assert option(gw["args"], "--bootstrap-servers") == "c-bootstrap.data.svc:9092"
    assert (option(gw["args"], "--host"), option(gw["args"], "--port")) == ("0.0.0.0", "8000")
    # Its Service's URL, over HTTPS with its certificate from the cluster CA.
    assert option(gw["args"], "--advertised-url") == "https://c-gateway.data.svc:8000"
    assert option(gw["args"], "--ssl-certfile") == "/etc/odradek/certs/gateway/gateway.crt"
    assert option(gw["args"], "--ssl-keyfile") == "/etc/odradek/certs/gateway/gateway.key"
    assert option(gw["args"], "--broker-metrics-urls") == "http://{host}:9404/metrics"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in gw["env"]
    assert gw["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8000, "scheme": "HTTPS"}
    assert gw["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8000, "scheme": "HTTPS"}
    assert gw["livenessProbe"]["timeoutSeconds"] == gw["readinessProbe"]["timeoutSeconds"] == 5
    assert gw["startupProbe"]["httpGet"] == gw["livenessProbe"]["httpGet"]   # liveness from a started gateway
    assert gw["startupProbe"]["periodSeconds"] * gw["startupProbe"]["failureThreshold"] == 120
    mount = gw["volumeMounts"][0]
    assert option(gw["args"], "--auth-file") == mount["mountPath"] + "/credentials" and mount["readOnly"]
    assert {"name": "ODRADEK_GATEWAY_REQUIRE_AUTH", "value": "true"} in gw["env"]
    # without authSecret: the tokens the operator generates, never an open gateway
    _, _, own_dep = gateway({"gateway": {"replicas": 1}})
    assert option(container(own_dep)["args"], "--auth-file") == "/etc/odradek/gateway-auth/credentials"
    assert [v["name"] for v in own_dep["spec"]["template"]["spec"]["volumes"]] == [
        "auth", "cluster-ca", "gateway-certs", "writable-tmp"]
    assert own_dep["spec"]["template"]["spec"]["volumes"][0]["secret"] == {"secretName": "c-gateway-tokens"}


def test_pod_template_overrides_and_rack_spread():
    spec = {"rack": {"topologyKey": "topology.kubernetes.io/zone"},
            "template": {"pod": {"metadata": {"labels": {"team": "x"}, "annotations": {"a": "b"}},
                                 "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                                 "nodeSelector": {"pool": "kafka"}}}}
    for obj in planned("c", NS, spec):
        if obj["kind"] not in ("StatefulSet", "Deployment"):
            continue
        tpl = obj["spec"]["template"]
        assert tpl["metadata"]["labels"]["team"] == "x"
        assert tpl["metadata"]["annotations"]["a"] == "b"
        assert tpl["spec"]["nodeSelector"] == {"pool": "kafka"}
        assert tpl["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
        # the selector labels cannot be overridden
        assert obj["spec"]["selector"]["matchLabels"].items() <= tpl["metadata"]["labels"].items()
    sts = by_kind(planned("c", NS, spec), "StatefulSet", "c-brokers")
    assert sts["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"


def test_rack_init_container_reads_the_node_label_for_the_broker():
    spec = {"rack": {"topologyKey": "topology.kubernetes.io/zone"}, "brokers": {"storage": {"type": "ephemeral"}}}
    children = planned("c", NS, spec)
    pod = by_kind(children, "StatefulSet", "c-brokers")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    broker = pod["containers"][0]
    assert init["args"][:2] == ["operator", "rack"]
    assert option(init["args"], "--topology-key") == "topology.kubernetes.io/zone"
    assert option(init["args"], "--node") == "$(NODE_NAME)"
    assert init["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert option(broker["args"], "--rack-file") == option(init["args"], "--output")
    assert {"name": "rack", "mountPath": "/etc/odradek/rack", "readOnly": True} in broker["volumeMounts"]
    assert {v["name"] for v in pod["volumes"]} == {"rack", "data", "cluster-ca", "broker-certs", "zookeeper-digest",
                                               "writable-tmp"}
    # The brokers read their Node as their own ServiceAccount, bound to the nodes-get role only.
    assert pod["serviceAccountName"] == by_kind(children, "ServiceAccount", "c-brokers")["metadata"]["name"]
    binding = builders.build_rack_binding("c", NS, "odk-broker-rack")
    assert binding["metadata"]["name"] == "odradek-rack-data-c" and "namespace" not in binding["metadata"]
    assert binding["roleRef"]["name"] == "odk-broker-rack"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "c-brokers", "namespace": NS}]


def test_no_rack_no_init_container_and_no_service_account():
    children = planned("c", NS, {})
    pod = by_kind(children, "StatefulSet", "c-brokers")["spec"]["template"]["spec"]
    assert "initContainers" not in pod and "serviceAccountName" not in pod
    assert "--rack-file" not in pod["containers"][0]["args"]
    assert not [c for c in children if c["kind"] == "ServiceAccount"]


def test_config_hash_changes_with_settings_and_image_only():
    base = {"brokers": {"replicas": 3, "config": {"retention.ms": "1000"}}}
    h = builders.config_hash("c", NS, cluster_spec(base))
    assert h == builders.config_hash("c", NS, cluster_spec({"brokers": {"replicas": 5, "config": {"retention.ms": 1000}}}))
    assert h != builders.config_hash("c", NS, cluster_spec({"brokers": {"config": {"retention.ms": "2000"}}}))
    assert h != builders.config_hash("c", NS, cluster_spec({**base, "image": "other:1"}))


def test_a_cluster_of_fewer_than_three_brokers_gets_every_broker_as_the_coordinators_topic_factors():
    """The brokers make __consumer_offsets and __transaction_state only once as many brokers are
    live as their factor (Kafka's 3 by default): a smaller cluster gets its size, unless set."""
    def configs(brokers: dict) -> dict:
        args = container(by_kind(planned("c", NS, {"brokers": brokers}), "StatefulSet", "c-brokers"))["args"]
        return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--config")
    factors = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")
    assert {k: configs({"replicas": 1})[k] for k in factors} == dict.fromkeys(factors, "1")
    assert {k: configs({"replicas": 2})[k] for k in factors} == dict.fromkeys(factors, "2")
    assert not set(factors) & set(configs({"replicas": 3}))
    given = configs({"replicas": 2, "config": {"offsets.topic.replication.factor": "1"}})
    assert (given["offsets.topic.replication.factor"], given["transaction.state.log.replication.factor"]) == ("1", "2")
    # the pods' settings, not the cluster's: no roll when a small cluster grows
    assert builders.config_hash("c", NS, cluster_spec({"brokers": {"replicas": 1}})) == \
        builders.config_hash("c", NS, cluster_spec({"brokers": {"replicas": 3}}))


def test_broker_replicas_override_for_a_refused_scale_down():
    sts = by_kind(planned("c", NS, {"brokers": {"replicas": 2}}, broker_replicas=4),
                  "StatefulSet", "c-brokers")
    assert sts["spec"]["replicas"] == 4


def test_keep_immutable_keeps_live_claim_templates():
    desired = by_kind(planned("c", NS, {"brokers": {"storage": {"size": "20Gi"}}}),
                      "StatefulSet", "c-brokers")
    live = {"spec": {"volumeClaimTemplates": [{
        "metadata": {"name": "data", "labels": {"x": "y"}, "creationTimestamp": None},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}]}}
    kept = cluster_plan.keep_immutable(desired, live)
    assert kept["spec"]["volumeClaimTemplates"] == [{
        "metadata": {"name": "data", "labels": {"x": "y"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}]
    assert desired["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert cluster_plan.keep_immutable(desired, None) is desired


def test_pvc_names():
    assert builders.pvc_names("c", 2) == ["data-c-brokers-0", "data-c-brokers-1"]


@pytest.mark.parametrize("spec", [{}, {"gateway": {"replicas": 1}}, {"zookeeper": {"external": {"connect": "z:2181"}}}])
def test_no_f_string_yaml_every_manifest_is_plain_data(spec):
    import json
    for obj in planned("c", NS, spec):
        json.dumps(obj)  # dicts, lists, str, int, bool only
        assert set(obj) >= {"apiVersion", "kind", "metadata"}


def test_controller_candidates_from_endpoint_slices():
    from odradek.operator import reconcile
    from odradek.operator.settings import OperatorSettings

    class FakeKube:
        def list(self, api_version, kind, namespace, selector):
            assert (kind, namespace, selector) == ("EndpointSlice", NS, "kubernetes.io/service-name=c-controller")
            return [{"endpoints": [{"addresses": ["10.0.0.5"], "conditions": {"ready": True}},
                                   {"addresses": ["10.0.0.6"], "conditions": {"ready": False}},
                                   {"addresses": ["fd00::7"]}]}]

    body = {"metadata": {"name": "c", "namespace": NS}}
    plain = OperatorSettings.from_env({})
    # by the names the controllers' certificates carry (the control plane takes mutual TLS)
    assert reconcile.controller_candidates(FakeKube(), body, plain) == [
        f"https://10-0-0-5.c-controller.{NS}.svc:8080", f"https://fd00--7.c-controller.{NS}.svc:8080"]
    override = OperatorSettings.from_env({"ODRADEK_OPERATOR_CONTROLLER_URL": "http://a:1, http://b:2/"})
    assert reconcile.controller_candidates(FakeKube(), body, override) == ["http://a:1", "http://b:2"]
    body["metadata"]["annotations"] = {"odradek.dev/controller-url": f"https://x.{NS}.svc:9"}
    assert reconcile.controller_candidates(FakeKube(), body, override) == [f"https://x.{NS}.svc:9"]


def test_gateway_arguments_parse_with_the_gateways_own_cli(tmp_path, monkeypatch):
    """As the pod's shell runs them: the schema registry (on by default) registers this pod's
    own URL, which the gateway's certificate names, while base_uri stays the Service's."""
    from odradek.gateway.settings import from_args
    _, _, dep = gateway({"gateway": {"replicas": 1, "authSecret": "gw-auth"}})
    fake = tmp_path / "odradek"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$ODRADEK_GATEWAY_SCHEMA_REGISTRY_URL" "$@"\n')
    fake.chmod(0o755)
    run = subprocess.run([*container(dep)["command"], *container(dep)["args"]], capture_output=True, text=True,
                         check=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin", "POD_IP": "10.1.2.3",
                                          "POD_NAMESPACE": NS})
    registry_url, *args = run.stdout.splitlines()
    assert args[0] == "gateway"
    monkeypatch.setenv(builders.REGISTRY_URL_ENV, registry_url)   # an env var: older images ignore it
    settings, _ = from_args(args[1:])
    assert (settings.host, settings.port, settings.advertised_url) == ("0.0.0.0", 8000, "https://c-gateway.data.svc:8000")
    assert settings.schema_registry and settings.registry_url == "https://10-1-2-3.c-gateway-pods.data.svc:8000"
    assert "*.c-gateway-pods.data.svc" in certs.component_names("c", NS, "gateway")
    assert settings.scheme == "https"
    assert settings.auth_file == "/etc/odradek/gateway-auth/credentials"
    assert settings.bootstrap_servers == "c-bootstrap.data.svc:9092"
