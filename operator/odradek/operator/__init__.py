"""The Odradek Kubernetes operator (kopf): OdradekCluster and OdradekTopic custom resources.

- ``spec``: the OdradekCluster spec as frozen values, the CRD's defaults stated once.
- ``validation``: spec checks (the reason of a ``kopf.PermanentError`` lands in status);
  ``parse_cluster`` makes the ``ClusterSpec``.
- ``security`` / ``principals``: the security plan (certificates, probes, settings) per pod.
- ``builders``: pure ``build_*`` functions returning child manifests as dicts, as applied.
- ``cluster_plan``: the reconcile's pure plan (spec + observed state -> objects to apply).
- ``rolling``: the broker rolling-restart plan (pure).
- ``kube``: server-side apply / reads through the ``kubernetes`` client.
- ``admin``: the controller admin API client (topics, health).
- ``handlers``: the kopf handlers, a few lines each.
"""
