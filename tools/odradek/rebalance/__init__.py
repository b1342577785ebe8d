"""``odradek rebalance`` (``cli``): proposals and executions through the controller
(``targets.ControllerTarget``) or, for any Kafka cluster, the same planner and executor run
in-process over Kafka's admin API (``targets.InProcessTarget``, ``kafka_port``)."""
