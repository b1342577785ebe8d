"""Confluent's schema-registry serialization, without Spark or a web framework: the wire format
(``wire``: magic byte 0, 4-byte schema id, for Protobuf the message indexes), one codec per
schema type turning payload bytes into Python values and back (``codecs``: fastavro, protobuf's
dynamic messages, jsonschema) and a client of the registry's REST API that caches schemas by id
(``registry``). The Spark source uses it (``odradek.spark.formats``); the gateway's formats can."""
