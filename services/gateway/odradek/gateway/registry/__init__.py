"""Odradek's schema registry, served by the gateway process: Confluent Schema Registry's REST API
on a compacted ``_schemas`` topic (docs/schema-registry.md).

``formats`` parses schemas of each type and checks their compatibility, ``state`` is the
registry's content rebuilt from ``_schemas`` records, ``log`` reads and writes that topic and
elects the primary, ``service`` is the operations, ``routes`` the HTTP API."""
