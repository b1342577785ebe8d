"""The operator's Kubernetes API calls: server-side apply of child manifests, reads, deletes.

One place imports the ``kubernetes`` client. Children are applied with server-side apply
(``application/apply-patch+yaml``, field manager ``odradek-operator``, conflicts forced: the
operator owns these fields), so a changed spec reaches existing children and fields set by
other managers (HPA replicas, admission defaults) are left alone. The REST paths come from a
small table of the kinds the operator touches — no discovery round trips.

Secrets are written only when the operator owns them (Strimzi's rule): a Secret that exists
must carry the operator's labels and an owner reference, as controller, to the very object the
manifest is adopted by (``foreign_secret``); else ``SecretConflict`` and nothing is written. An
owned Secret is applied with its ``resourceVersion`` as a precondition (it cannot change hands
between the check and the write) and under a field manager of its kind
(``secret_field_manager``: ``odradek-operator-user``, ``-certificates``, ``-zookeeper``...), so
a forced apply of one kind can never strip the keys another kind set.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Mapping

from odradek.operator.builders import CLUSTER_LABEL
from odradek.operator.spec import SpecError

FIELD_MANAGER = "odradek-operator"
MANAGED_BY = ("app.kubernetes.io/managed-by", FIELD_MANAGER)   # builders.labels
COMPONENT_LABEL = "app.kubernetes.io/component"

# (apiVersion, kind) -> (plural, namespaced)
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("discovery.k8s.io/v1", "EndpointSlice"): ("endpointslices", True),
    ("odradek.dev/v1alpha1", "OdradekCluster"): ("odradekclusters", True),
    ("odradek.dev/v1alpha1", "OdradekTopic"): ("odradektopics", True),
    ("odradek.dev/v1alpha1", "OdradekUser"): ("odradekusers", True),
    ("odradek.dev/v1alpha1", "OdradekRebalance"): ("odradekrebalances", True),
    ("odradek.dev/v1alpha1", "OdradekConnect"): ("odradekconnects", True),
    ("odradek.dev/v1alpha1", "OdradekConnector"): ("odradekconnectors", True),
    ("odradek.dev/v1alpha1", "OdradekMirrorMaker2"): ("odradekmirrormaker2s", True),
}


def resource_path(api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
    plural, namespaced = RESOURCES[(api_version, kind)]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is required")
        base += f"/namespaces/{namespace}"
    path = f"{base}/{plural}"
    return f"{path}/{name}" if name else path


class SecretConflict(SpecError):
    """A Secret the operator would write exists and is not its own (nothing was written)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "SecretConflict")


def _controller_uids(meta: Mapping[str, Any]) -> set[str]:
    return {r["uid"] for r in meta.get("ownerReferences") or [] if r.get("controller") and r.get("uid")}


def foreign_secret(existing: Mapping[str, Any] | None, manifest: Mapping[str, Any]) -> str | None:
    """Why the operator may not write ``manifest`` over ``existing`` (None: it is absent, or
    the operator's: its labels, and controlled by the object ``manifest`` is adopted by)."""
    if existing is None:
        return None
    meta, have = manifest["metadata"], existing.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta['name']} exists and"
    owners = _controller_uids(meta)
    if not owners:
        raise ValueError(f"Secret {meta['name']}: adopt it before applying (no owner to check against)")
    owner = next(r for r in meta["ownerReferences"] if r.get("controller"))
    if not owners & _controller_uids(have):
        return (f"{where} is not owned by {owner.get('kind')} {owner.get('name')}: the operator does not "
                "write Secrets it does not own")
    labels, want = have.get("labels") or {}, meta.get("labels") or {}
    if labels.get(MANAGED_BY[0]) != MANAGED_BY[1] or labels.get(CLUSTER_LABEL) != want.get(CLUSTER_LABEL):
        return (f"{where} lacks the operator's labels ({MANAGED_BY[0]}={MANAGED_BY[1]}, "
                f"{CLUSTER_LABEL}={want.get(CLUSTER_LABEL)}): the operator does not write Secrets it does not own")
    return None


def secret_field_manager(manifest: Mapping[str, Any]) -> str:
    """One field manager per kind of Secret (its component label: user, certificates, zookeeper...)."""
    component = ((manifest["metadata"].get("labels") or {}).get(COMPONENT_LABEL) or "secret")
    return f"{FIELD_MANAGER}-{component}"


class Kube:
    """A thin wrapper over ``kubernetes.client.ApiClient`` returning plain dicts.

    ``api_client``: a configured ``ApiClient`` (tests); default: in-cluster config, else the
    kubeconfig (``KUBECONFIG``)."""

    _lock = threading.Lock()
    _configured = False

    def __init__(self, api_client: Any = None) -> None:
        from kubernetes import client
        if api_client is None:
            self._configure()
            api_client = client.ApiClient()
        self.api = api_client
        self.ApiException = client.exceptions.ApiException

    @classmethod
    def _configure(cls) -> None:
        from kubernetes import config
        with cls._lock:
            if cls._configured:
                return
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            cls._configured = True

    def request(self, method: str, path: str, body: Any = None, query: list | None = None,
                content_type: str = "application/json", timeout: float | None = None) -> Any:
        """One REST call; the decoded JSON answer; ``ApiException`` for a non-2xx status."""
        method, url, headers, body, post = self.api.param_serialize(
            method=method, resource_path=path, query_params=query or [], body=body,
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            auth_settings=["BearerToken"])
        response = self.api.call_api(method, url, header_params=headers, body=body, post_params=post,
                                     _request_timeout=timeout)
        response.read()
        if not 200 <= response.status <= 299:
            raise self.ApiException.from_response(http_resp=response, body=response.data.decode(errors="replace"),
                                                  data=None)
        return json.loads(response.data) if response.data else None

    def apply(self, manifest: dict) -> dict:
        """Server-side apply; a Secret only if the operator owns it (``SecretConflict``)."""
        meta = manifest["metadata"]
        path = resource_path(manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"])
        manager = FIELD_MANAGER
        if (manifest["apiVersion"], manifest["kind"]) == ("v1", "Secret"):
            existing = self.get("v1", "Secret", meta.get("namespace"), meta["name"])
            problem = foreign_secret(existing, manifest)
            if problem is not None:
                raise SecretConflict(problem)
            if existing is not None:   # a precondition: 409 if it changed since it was checked
                manifest = {**manifest, "metadata": {**meta, "resourceVersion": existing["metadata"]["resourceVersion"]}}
            manager = secret_field_manager(manifest)
        return self.request("PATCH", path, manifest, [("fieldManager", manager), ("force", "true")],
                            "application/apply-patch+yaml")

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        try:
            return self.request("GET", resource_path(api_version, kind, namespace, name))
        except self.ApiException as e:
            if e.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str = "") -> list[dict]:
        query = [("labelSelector", label_selector)] if label_selector else []
        return self.request("GET", resource_path(api_version, kind, namespace), query=query).get("items") or []

    def merge_patch(self, api_version: str, kind: str, namespace: str | None, name: str, patch: dict) -> dict:
        return self.request("PATCH", resource_path(api_version, kind, namespace, name), patch,
                          content_type="application/merge-patch+json")

    def remove_annotation_if(self, api_version: str, kind: str, namespace: str | None, name: str,
                             key: str, value: str) -> bool:
        """Remove the annotation ``key`` only while it still says ``value`` (a JSON patch's test):
        one the user set since the pass read the object stays for the next pass. False if it changed."""
        path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        try:
            self.request("PATCH", resource_path(api_version, kind, namespace, name),
                         [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}],
                         content_type="application/json-patch+json")
            return True
        except self.ApiException as e:
            if e.status in (404, 422):   # gone, or the test failed: the annotation changed
                return False
            raise

    def update_status(self, api_version: str, kind: str, namespace: str, name: str,
                      update: Callable[[dict], dict | None], attempts: int = 3) -> bool:
        """Merge ``update(the object now)`` into its status (None: nothing to write), on the
        condition that the object did not change since it was read (its resourceVersion in the
        merge patch: 409, read again). For a writer whose reads are slow (the status timer): it
        would otherwise write over what another handler changed meanwhile, a merge patch
        replacing ``conditions`` whole. False if nothing was written (gone, declined, or it kept
        changing)."""
        path = resource_path(api_version, kind, namespace, name) + "/status"
        for _ in range(attempts):
            live = self.get(api_version, kind, namespace, name)
            fields = None if live is None else update(live)
            if fields is None:
                return False
            try:
                self.request("PATCH", path, {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
                                             "status": fields}, content_type="application/merge-patch+json")
                return True
            except self.ApiException as e:
                if e.status == 404:
                    return False
                if e.status != 409:
                    raise
        return False

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> bool:
        try:
            self.request("DELETE", resource_path(api_version, kind, namespace, name))
            return True
        except self.ApiException as e:
            if e.status == 404:
                return False
            raise


_shared: Kube | None = None


def shared() -> Kube:
    """One client per process (the handlers run in kopf's thread pool; ApiClient is thread-safe
    for independent calls)."""
    global _shared
    if _shared is None:
        _shared = Kube()
    return _shared
