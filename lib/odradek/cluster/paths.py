"""ZooKeeper layout (docs/control-plane.md, "ZooKeeper znodes"), relative to ``/odradek/<cluster>``.

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
PRODUCER_ID_BLOCK = "/producer_id_block"

PERSISTENT_ROOTS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, DELETE_TOPICS)


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
