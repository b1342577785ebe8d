"""Compression codecs of a record batch's records block, framed the way Kafka's clients frame them.

Owns the codec ids (bits 0-2 of a batch's attributes) and the bytes each codec writes:
gzip; snappy in xerial framing (the Java client's ``SnappyOutputStream``: magic, version,
then length-prefixed 32 KiB blocks), raw snappy accepted when reading; lz4 in the frame
format with independent blocks; zstd. The work is cramjam's. Stateless, thread-safe.
"""

from __future__ import annotations

import enum
import struct

import cramjam

from odradek.errors import ErrorCode, KafkaError

__all__ = ["Compression", "compress", "decompress"]


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_I32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes | memoryview) -> bytes:
    out, view = bytearray(_XERIAL_HEADER), memoryview(data)
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i:i + _XERIAL_BLOCK]))
        out += _I32.pack(len(block)) + block
    return bytes(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out, position = bytearray(), len(_XERIAL_HEADER)
    while position < len(view):
        size = _I32.unpack_from(view, position)[0]
        out += cramjam.snappy.decompress_raw(view[position + 4:position + 4 + size])
        position += 4 + size
    return bytes(out)


def _lz4_compress(data: bytes | memoryview) -> bytes:
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


_CODECS = {
    Compression.NONE: (bytes, bytes),
    Compression.GZIP: (cramjam.gzip.compress, cramjam.gzip.decompress),
    Compression.SNAPPY: (_snappy_compress, _snappy_decompress),
    Compression.LZ4: (_lz4_compress, cramjam.lz4.decompress),
    Compression.ZSTD: (cramjam.zstd.compress, cramjam.zstd.decompress),
}


def compress(codec: Compression, data: bytes | memoryview) -> bytes:
    return bytes(_CODECS[Compression(codec)][0](data))


def decompress(codec: Compression, data: bytes | memoryview) -> bytes:
    """The records block uncompressed; a block the codec cannot read is CORRUPT_MESSAGE."""
    try:
        return bytes(_CODECS[Compression(codec)][1](data))
    except (cramjam.DecompressionError, ValueError, struct.error) as e:
        raise KafkaError(ErrorCode.corrupt_message,
                         f"cannot decompress a {Compression(codec).name} batch: {e}") from None
