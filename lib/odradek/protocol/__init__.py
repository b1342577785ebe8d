"""The Kafka wire protocol: framing, request/response codecs over kio's schemas, and the
table of APIs and versions Odradek supports."""
