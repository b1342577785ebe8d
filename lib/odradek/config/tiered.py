"""Tiered storage's broker keys (KIP-405): Kafka's names and defaults for the switch and the
remote log manager, and the object store's settings under Kafka's ``rsm.config.`` prefix
(``remote.log.storage.manager.impl.prefix``) with the key names of Aiven's S3 plugin for Kafka,
the one Strimzi documents, so that a Kafka broker's settings carry over; the remote reads'
threads, queue, wait and index cache under Kafka's names, the chunk size and chunk cache under
the plugin's (``chunk.size``, ``fetch.chunk.cache.size``).

Credentials are not keys: DescribeConfigs shows every broker key's value, so the keys name a
credentials file (the AWS shared-credentials format) or leave boto3's default chain to find
them (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a web identity, an instance role).
The broker's ``BrokerConfig`` binds them; docs/tiered-storage.md.
"""

from __future__ import annotations

from odradek.config.keys import BOOLEAN, INT_MAX, LONG_MAX, ConfigKey, integer, registry
from odradek.config.security import TEXT

TIERED_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey("remote.log.storage.system.enable", BOOLEAN, "false",
              "run tiered storage on this broker: the remote log manager copies the rolled segments of topics with "
              "remote.storage.enable to the object store (docs/tiered-storage.md)"),
    ConfigKey("remote.log.manager.task.interval.ms", integer(1, LONG_MAX), "30000",
              "how often the remote log manager copies, lists and expires each partition's remote segments"),
    ConfigKey("remote.log.reader.threads", integer(1, INT_MAX), "10",
              "threads reading remote segments for consumers' fetches, ListOffsets by timestamp and followers "
              "rebuilding from the store (their read-ahead too)"),
    ConfigKey("remote.log.reader.max.pending.tasks", integer(1, INT_MAX), "100",
              "remote reads queued or running at most; a fetch beyond it is answered UNKNOWN_SERVER_ERROR "
              "(clients retry), as Kafka's full reader queue"),
    ConfigKey("remote.fetch.max.wait.ms", integer(1, INT_MAX), "500",
              "how long a fetch waits on its remote read before it is answered without records (the read goes "
              "on and fills the chunk cache the retried fetch reads from)"),
    ConfigKey("remote.log.index.file.cache.total.size.bytes", integer(1, LONG_MAX), "1073741824",
              "bytes of remote offset, time and transaction indexes kept (in memory here), least recently used "
              "evicted first"),
    ConfigKey("rsm.config.chunk.size", integer(4096, 1073741823), "1048576",
              "bytes per checksummed chunk of a copied segment: the unit of verification, ranged reads, the "
              "chunk cache and read-ahead (each segment's manifest records the size it was copied with)"),
    ConfigKey("rsm.config.fetch.chunk.cache.size", integer(1, LONG_MAX), "67108864",
              "bytes of verified remote segment chunks kept in memory for consumers reading on, least recently "
              "used evicted first"),
    ConfigKey("rsm.config.storage.s3.endpoint.url", TEXT, "",
              "the S3-compatible object store's URL (empty: AWS S3 in rsm.config.storage.s3.region)"),
    ConfigKey("rsm.config.storage.s3.bucket.name", TEXT, "odradek-tiered", "the bucket remote segments go to"),
    ConfigKey("rsm.config.storage.s3.region", TEXT, "us-east-1", "the object store's region (AWS signature v4)"),
    ConfigKey("rsm.config.storage.key.prefix", TEXT, "", "prefix of every object key (several clusters, one bucket)"),
    ConfigKey("rsm.config.storage.aws.credentials.file", TEXT, "",
              "path of an AWS shared-credentials file ([default] aws_access_key_id, aws_secret_access_key); "
              "empty: boto3's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, roles)"),
)
