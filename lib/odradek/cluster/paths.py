"""ZooKeeper layout (docs/control-plane.md, "ZooKeeper znodes"), relative to ``/odradek/<cluster>``:
where each znode is. What a znode the brokers read or write holds, and how it is encoded and
decoded, is ``odradek.cluster.zk_data``'s (one kind each, built on these paths).

Every znode holds UTF-8 JSON. Kazoo clients are created with the chroot in the connect
string (``host:port/odradek/<cluster>``), so these paths are absolute inside it.
"""

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
MAINTENANCE = "/admin/maintenance"       # /admin/maintenance/<broker id>: brokers in maintenance mode
PRODUCER_ID_BLOCK = "/producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"  # persistent sequential children, Kafka's names
LOG_DIR_FAILURE = 1  # the event's "event" field, as Kafka's LogDirEventNotificationHandler
CONFIG = "/config"                       # /config/<entity type>/<entity>: Kafka's dynamic configs
CONFIG_CHANGES = "/config/changes"       # config_change_<seq>: which entity changed (Kafka's notification)
CONFIG_CHANGE_PREFIX = "config_change_"
DEFAULT_ENTITY = "<default>"             # the entity name of a type's cluster-wide default

PERSISTENT_ROOTS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, DELETE_TOPICS, LOG_DIR_EVENT_NOTIFICATION)


def chroot(cluster: str) -> str:
    return f"/odradek/{cluster}"


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partitions(name: str) -> str:
    return f"{TOPICS}/{name}/partitions"


def partition_state(name: str, partition: int) -> str:
    return f"{TOPICS}/{name}/partitions/{partition}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def entity_config(entity_type: str, name: str) -> str:
    """``/config/brokers/<id>``, ``/config/brokers/<default>``, ``/config/users/<user>``..."""
    return f"{CONFIG}/{entity_type}/{name}"


def log_dir_event(name: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{name}"


def maintenance(broker_id: int) -> str:
    return f"{MAINTENANCE}/{broker_id}"
