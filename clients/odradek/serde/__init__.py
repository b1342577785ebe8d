"""Confluent's schema-registry serialization, without Spark or a web framework: the wire format
(``wire``: magic byte 0, 4-byte schema id, for Protobuf the message indexes), one codec per
schema type turning payload bytes into Python values and back (``codecs``: fastavro, protobuf's
dynamic messages, jsonschema) and a client of the registry's REST API that caches schemas by id
(``registry``). The one implementation of each in the project: the Spark source uses it
(``odradek.spark.formats``, shipped to executors in ``odradek.spark.bundle``'s zip, so nothing
here imports the gateway or ``lib/odradek``), and the gateway's REST formats build on ``wire`` and
``codecs`` (``odradek.gateway.serde``: only the JSON shapes and error mapping are its own)."""
