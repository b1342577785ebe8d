"""The Odradek controller: election, placement, partition state machine, admin API.

Modules: ``store`` (metadata-store interface), ``zkstore`` (its kazoo implementation, the
only module importing kazoo), ``placement`` (pure placement/election rules), ``admin``
(topic admin decisions and writes), ``push`` (snapshot delivery to brokers), ``service``
(the election and reconcile loop), ``api`` (the control plane's HTTP app), ``cli``.
"""
