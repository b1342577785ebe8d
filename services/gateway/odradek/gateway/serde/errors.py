"""The one error of ``serde``: a value that does not conform to its schema, or data that is not
what its schema says (Confluent's serializers' ``SerializationException``)."""


class SerdeError(ValueError):
    pass
