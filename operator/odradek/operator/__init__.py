"""The Odradek Kubernetes operator (kopf): OdradekCluster and OdradekTopic custom resources.

- ``validation``: spec checks (the reason of a ``kopf.PermanentError`` lands in status).
- ``builders``: pure ``build_*`` functions returning child manifests as dicts.
- ``rolling``: the broker rolling-restart plan (pure).
- ``kube``: server-side apply / reads through the ``kubernetes`` client.
- ``admin``: the controller admin API client (topics, health).
- ``handlers``: the kopf handlers, a few lines each.
"""
