"""Where Apache Kafka's Java producer puts a keyed record: its default partitioner hashes the
key's bytes with murmur2 and takes ``toPositive(hash) % partitions`` (``BuiltInPartitioner``).
The hash is kafka-python's ``murmur2``, a port of Kafka's ``Utils.murmur2`` (no copy here);
null keys have no fixed place (Java's producer sticks them to a batch's partition).

``KEYS`` spans every remainder of the key length modulo 4 (murmur2's tail cases) and the empty key.
"""

from __future__ import annotations

from kafka.partitioner.default import murmur2

KEYS = [b"", *(b"k" * n for n in range(1, 9)), *(b"user-%d" % i for i in range(60))]


def java_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions
