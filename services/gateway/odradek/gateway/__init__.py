"""Odradek HTTP gateway: Confluent REST Proxy v2 compatible produce/consume, admin and Arrow range reads."""
