"""The balancer: a cluster model in, a proposal of partition moves out (``planner``), pure."""

from .model import Broker, BrokerLoad, ClusterModel, Move, Partition, Proposal
from .planner import MODES, PlanError, change_replication_factor, plan

__all__ = ["Broker", "BrokerLoad", "ClusterModel", "Move", "Partition", "Proposal", "MODES", "PlanError",
           "change_replication_factor", "plan"]
