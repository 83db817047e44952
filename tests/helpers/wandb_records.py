"""Decode an offline W&B run file (``run-<id>.wandb``) so tests can see what was logged.

The file is framed like a LevelDB log: a 7-byte header (``:W&B``, magic 0xBEE1 as
little-endian u16, version byte 0), then 32 KiB blocks holding records with a 7-byte
header each (crc32 u32 LE, length u16 LE, type u8; FULL=1 FIRST=2 MIDDLE=3 LAST=4).
A block tail shorter than a record header is zero padding. Reassembled payloads are
``wandb.proto.wandb_internal_pb2.Record`` protobufs. The header counts as part of the
first block (block boundaries are absolute file offsets).

``checkpoint.json`` itself is not in the record log: the artifact record's manifest
entry carries ``local_path``, the copy wandb staged under ``WANDB_DATA_DIR``
(``<data dir>/artifacts/staging/<tmpname>``, default ``~/.local/share/wandb``; the tests
point it under ``WANDB_DIR``). That copy is what a later ``wandb sync`` uploads, so it
outlives the run; the decoder reads it from there.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER_IDENT = b":W&B"
HEADER_MAGIC = 0xBEE1
HEADER_LEN = 7
BLOCK_SIZE = 32 * 1024
RECORD_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class DecodeError(ValueError):
    pass


@dataclass
class ArtifactInfo:
    name: str
    type: str
    aliases: list[str]
    metadata: dict[str, Any]
    entries: list[dict[str, Any]]
    checkpoint_json: dict[str, Any] | None
    checkpoint_json_path: str | None
    run_id: str
    project: str


@dataclass
class RunFile:
    path: Path
    run_id: str | None = None
    project: str | None = None
    entity: str | None = None
    job_type: str | None = None
    resumed: bool | None = None
    config_json: dict[str, str] = field(default_factory=dict)
    artifacts: list[ArtifactInfo] = field(default_factory=list)
    record_kinds: list[str] = field(default_factory=list)


def iter_payloads(data: bytes) -> list[bytes]:
    """Reassemble the record payloads of a ``.wandb`` file, checking every crc."""
    if len(data) < HEADER_LEN or data[:4] != HEADER_IDENT:
        raise DecodeError("not a .wandb file (no :W&B header)")
    magic, version = struct.unpack("<HB", data[4:HEADER_LEN])
    if magic != HEADER_MAGIC or version != 0:
        raise DecodeError(f"unexpected header magic={magic:#x} version={version}")
    out: list[bytes] = []
    pending: list[bytes] | None = None
    pos = HEADER_LEN
    while pos < len(data):
        left_in_block = BLOCK_SIZE - pos % BLOCK_SIZE
        if left_in_block < RECORD_HEADER_LEN:
            pos += left_in_block  # zero padding at the block's end
            continue
        if pos + RECORD_HEADER_LEN > len(data):
            break  # truncated tail (a run still being written)
        crc, length, rtype = struct.unpack("<IHB", data[pos : pos + RECORD_HEADER_LEN])
        if crc == 0 and length == 0 and rtype == 0:
            pos += left_in_block  # pre-allocated zeros
            continue
        start = pos + RECORD_HEADER_LEN
        chunk = data[start : start + length]
        if len(chunk) < length:
            break
        if zlib.crc32(chunk, zlib.crc32(bytes([rtype]))) & 0xFFFFFFFF != crc:
            raise DecodeError(f"crc mismatch at offset {pos}")
        pos = start + length
        if rtype == FULL:
            out.append(chunk)
        elif rtype == FIRST:
            pending = [chunk]
        elif rtype == MIDDLE and pending is not None:
            pending.append(chunk)
        elif rtype == LAST and pending is not None:
            pending.append(chunk)
            out.append(b"".join(pending))
            pending = None
        else:
            raise DecodeError(f"bad record type {rtype} at offset {pos}")
    return out


def _read_staged_json(local_path: str) -> dict[str, Any] | None:
    p = Path(local_path)
    if not p.is_file():
        return None
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def decode_run_file(path: str | Path) -> RunFile:
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    result = RunFile(path=path)
    for payload in iter_payloads(path.read_bytes()):
        rec = pb.Record()  # type: ignore[attr-defined]  # generated protobuf, no stubs
        rec.ParseFromString(payload)
        kind = rec.WhichOneof("record_type") or ""
        result.record_kinds.append(kind)
        if kind == "run":
            r = rec.run
            result.run_id = r.run_id
            result.project = r.project
            result.entity = r.entity
            result.job_type = r.job_type
            result.resumed = r.resumed
            for item in r.config.update:
                result.config_json[item.key] = item.value_json
        elif kind == "artifact":
            a = rec.artifact
            entries: list[dict[str, Any]] = []
            ck_json: dict[str, Any] | None = None
            ck_path: str | None = None
            for e in a.manifest.contents:
                entries.append(
                    {
                        "path": e.path,
                        "digest": e.digest,
                        "size": e.size,
                        "ref": e.ref,
                        "local_path": e.local_path,
                    }
                )
                if e.path == "checkpoint.json" and e.local_path:
                    ck_path = e.local_path
                    ck_json = _read_staged_json(e.local_path)
            result.artifacts.append(
                ArtifactInfo(
                    name=a.name,
                    type=a.type,
                    aliases=list(a.aliases),
                    metadata=json.loads(a.metadata) if a.metadata else {},
                    entries=entries,
                    checkpoint_json=ck_json,
                    checkpoint_json_path=ck_path,
                    run_id=a.run_id,
                    project=a.project,
                )
            )
    return result


def find_run_files(wandb_dir: str | Path) -> list[Path]:
    """Every ``run-*.wandb`` under ``WANDB_DIR`` (``wandb/offline-run-*/run-<id>.wandb``)."""
    return sorted(Path(wandb_dir).glob("**/offline-run-*/run-*.wandb"))


def decode_single_run(wandb_dir: str | Path) -> RunFile:
    files = find_run_files(wandb_dir)
    if len(files) != 1:
        raise DecodeError(f"expected one offline run file under {wandb_dir}, found {len(files)}")
    return decode_run_file(files[0])
