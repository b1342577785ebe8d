"""``odradek rebalance``: the balancer's plans executed through Kafka's admin API
(``cli``: options; ``kafka_port``: the cluster seen and driven over kafka-python;
``executor``: batches, throttles, progress, the preferred-leader election)."""
