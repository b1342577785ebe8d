"""Odradek's schema registry, served by the gateway process: Confluent Schema Registry's REST API
on a compacted ``_schemas`` topic (docs/schema-registry.md).

``schemas`` parses schemas and applies the compatibility levels, with one module per format
(``avro_schemas``, ``json_schemas``, ``proto_schemas``); ``state`` is the registry's content
rebuilt from ``_schemas`` records; ``log`` reads and writes that topic and elects the primary;
``service`` is the operations; ``routes`` the HTTP API, ``access`` its rights (``kafka_rights``:
a mapped principal's operations, as its brokers report them), ``forward`` the
writes a follower sends to the primary; ``app`` starts it in the gateway's lifespan."""
