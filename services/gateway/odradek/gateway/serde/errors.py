"""The one error of ``odradek.gateway.serde``: a value that does not conform to its schema, or data
that is not what its schema says (Confluent's serializers' ``SerializationException``); the client
codecs' ``SchemaError`` and the wire format's ``WireFormatError`` become it."""


class SerdeError(ValueError):
    pass
