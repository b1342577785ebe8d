"""The Odradek broker: Kafka listener, request handlers, partition logs, control-plane API."""
