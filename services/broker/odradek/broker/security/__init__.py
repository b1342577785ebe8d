"""Listeners, TLS and SASL of the broker's Kafka wire (docs/security.md)."""
