"""Test support: what the tests share besides fixtures (the conftest.py files declare those and
import from here). One module per responsibility:

- ``records``: the records the client acceptance tests produce, and the check of what comes back;
- ``clients``: produce and consume them with librdkafka, kafka-python and aiokafka;
- ``kafka_wire``: a raw Kafka-protocol client (one request, one response) for wire-level tests;
- ``controllers``: controller instances as processes, and JSON over HTTP;
- ``fake_peers``: a fake broker and a fake controller (tiny JSON HTTP servers);
- ``gateway``: the HTTP gateway as its own process, and its content types;
- ``kafka_tools``: Kafka's Java tools against an endpoint (the compatibility suite);
- ``k8s``: Kubernetes binaries, the loopback control plane, API access, the operator's process;
- ``spark``: the environment a local SparkSession needs.

A dev cluster as processes (``odradek.dev.harness``) and ``wait_until`` (``odradek.dev.waiting``)
are tooling, not test support: the benches use them too.
"""
