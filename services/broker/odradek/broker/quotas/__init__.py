"""Client quotas (docs/quotas.md): sampled rates, Kafka's resolution order, enforcement."""
