"""The gateway's registry-framed encodings in-process (``odradek.gateway.serde``): records per
second encoded (a v2/v3 produce's JSON value to the bytes on the topic) and decoded (a
schema-format consumer's bytes to JSON), per format, on one small record (a string and an int).

    .venv/bin/python -m bench.serde --records 20000

No cluster: what one gateway core can encode and decode, the ceiling of schema-format produce
and consume before Kafka. Best of ``--rounds`` (a shared machine's load only slows a round).
"""

from __future__ import annotations

import argparse
import json
import time

from odradek.gateway import serde
from odradek.gateway.registry import schemas as sc

VALUE = {"name": "ada", "age": 36}
SCHEMAS = {
    sc.AVRO: json.dumps({"type": "record", "name": "P", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}),
    sc.JSON: json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                         "required": ["name"]}),
    sc.PROTOBUF: 'syntax = "proto3";\nmessage P { string name = 1; int32 age = 2; }\n',
}


def _rate(fn, records: int) -> float:
    start = time.perf_counter()
    for _ in range(records):
        fn()
    return records / (time.perf_counter() - start)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--records", type=int, default=20000)
    args.add_argument("--rounds", type=int, default=3)
    opts = args.parse_args()
    for kind, text in SCHEMAS.items():
        parsed = sc.parse(sc.Schema(kind, text), {})
        data = serde.encode(parsed, VALUE)
        encode = max(_rate(lambda: serde.encode(parsed, VALUE), opts.records) for _ in range(opts.rounds))
        decode = max(_rate(lambda: serde.decode(parsed, data), opts.records) for _ in range(opts.rounds))
        print(f"{kind:9s} encode {encode:>9,.0f} records/s   decode {decode:>9,.0f} records/s")


if __name__ == "__main__":
    main()
