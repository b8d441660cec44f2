"""Read the records of an offline W&B run file (run-<id>.wandb) for the tests: a 7-byte header (":W&B", magic,
version), then LevelDB-log framed protobuf `Record`s (32 KiB blocks; chunk header crc32, length, type)."""

from __future__ import annotations

import struct
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: str | Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    raw = Path(path).read_bytes()
    assert raw[:4] == b":W&B", f"{path} is not a W&B run file"
    pos, out, pending = HEADER, [], b""
    while pos + HEADER <= len(raw):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos:pos + HEADER])
        chunk = raw[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            rec = pb.Record()
            rec.ParseFromString(pending)
            out.append(rec)
    return out
