"""Weights a training checkpoint saved in a form no inference stack loads, written as safetensors.

Two sources: a ``torch.distributed.checkpoint`` folder (``.metadata`` and every rank's
``__N_M.distcp``), and ``.bin`` weights files (pickles, read only with
``torch.load(weights_only=True)``). The output is ``model.safetensors``, or
``model-0000K-of-0000N.safetensors`` shards of at most ``max_shard_size`` bytes each (a
tensor larger than that gets a shard of its own) with ``model.safetensors.index.json``,
as transformers' ``save_pretrained`` names them; tensors keep their names (less
``strip_prefix``) and their dtype.

The DCP consolidation streams: every output file's header is known from ``.metadata``
alone (names, shapes, dtypes), so each file is laid out first and each saved chunk is
read, checked against ``.metadata``'s shape and dtype, and written at its place with
``os.pwrite``: the process holds one chunk (at most one input file) at a time, never a
whole output shard. torch is imported only when a conversion runs: importing this module
needs no torch.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.dcpmeta import METADATA, read_metadata, relative_path
from ckpt_action.errors import CkptError, one_line

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
DEFAULT_MAX_SHARD_SIZE = 5 * 10**9
"""5 GB, as transformers' ``save_pretrained`` and ``push_to_hub`` shard by default."""

# torch's dtype name -> safetensors' dtype tag (the format's spec).
_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
    "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
}


@dataclass(frozen=True)
class TensorSpec:
    """One output tensor: its name in the output, its shape, dtype tag and byte size."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass
class Converted:
    """What a conversion wrote into the output dir, and what it left out of the source."""

    files: list[str]
    tensors: int
    total_size: int
    left_out: list[str] = field(default_factory=list)
    """Entries of the source that are not weights (DCP bytes entries, names outside
    ``strip_prefix``), each with why."""


def shard_plan(specs: list[TensorSpec], max_shard_size: int) -> list[list[TensorSpec]]:
    """Tensors in order, cut into shards of at most ``max_shard_size`` bytes (a tensor
    larger than that alone in its own), as transformers cuts them.

    >>> s = [TensorSpec(n, (b,), "U8", b) for n, b in (("a", 4), ("b", 4), ("c", 9), ("d", 1))]
    >>> [[t.name for t in shard] for shard in shard_plan(s, 8)]
    [['a', 'b'], ['c'], ['d']]
    """
    shards: list[list[TensorSpec]] = [[]]
    size = 0
    for spec in specs:
        if shards[-1] and size + spec.nbytes > max_shard_size:
            shards.append([])
            size = 0
        shards[-1].append(spec)
        size += spec.nbytes
    return [s for s in shards if s]


def shard_names(count: int) -> list[str]:
    """``model.safetensors`` alone, else transformers' ``model-0000K-of-0000N.safetensors``.

    >>> shard_names(1), shard_names(2)
    (['model.safetensors'], ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'])
    """
    if count == 1:
        return [SINGLE]
    return [f"model-{k:05d}-of-{count:05d}.safetensors" for k in range(1, count + 1)]


def header(specs: list[TensorSpec]) -> tuple[bytes, dict[str, int]]:
    """A safetensors header for ``specs`` in order (length prefix included, padded to 8
    bytes as the format asks), and each tensor's absolute byte offset in the file."""
    doc: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offsets: dict[str, int] = {}
    at = 0
    for spec in specs:
        doc[spec.name] = {"dtype": spec.dtype, "shape": list(spec.shape), "data_offsets": [at, at + spec.nbytes]}
        offsets[spec.name] = at
        at += spec.nbytes
    text = json.dumps(doc, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    start = 8 + len(text)
    return len(text).to_bytes(8, "little") + text, {name: start + off for name, off in offsets.items()}


def _out_name(name: str, strip_prefix: str | None) -> str | None:
    if not strip_prefix:
        return name
    return name[len(strip_prefix):] if name.startswith(strip_prefix) and len(name) > len(strip_prefix) else None


def _dtype_tag(dtype: Any, name: str) -> str:
    tag = _DTYPES.get(str(dtype).removeprefix("torch."))
    if tag is None:
        raise CkptError(f"the tensor {one_line(name, 80)} has dtype {dtype}, which safetensors does not store:"
                        " cast it before saving, or promote without --as-model")
    return tag


def _write_layout(out: Path, shards: list[list[TensorSpec]]) -> dict[str, tuple[Path, int]]:
    """Each output file created at its full size with its header; where each tensor goes."""
    where: dict[str, tuple[Path, int]] = {}
    for fname, shard in zip(shard_names(len(shards)), shards, strict=True):
        head, offsets = header(shard)
        path = out / fname
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(len(head) + sum(s.nbytes for s in shard))
        where.update({name: (path, off) for name, off in offsets.items()})
    return where


def _write_index(out: Path, shards: list[list[TensorSpec]]) -> list[str]:
    names = shard_names(len(shards))
    if len(shards) == 1:
        return names
    index = {"metadata": {"total_size": sum(s.nbytes for shard in shards for s in shard)},
             "weight_map": {s.name: fname for fname, shard in zip(names, shards, strict=True) for s in shard}}
    (out / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return [*names, INDEX]


def _runs(full: tuple[int, ...], offsets: tuple[int, ...], sizes: tuple[int, ...],
          itemsize: int) -> Iterator[tuple[int, int, int]]:
    """A chunk of a C-contiguous tensor as contiguous byte runs: (byte offset in the full
    tensor, byte offset in the chunk, length). Dims after the first one the chunk does not
    span whole make each run; dims before it repeat it.

    >>> list(_runs((4, 3), (2, 0), (2, 3), 1))  # rows 2-3: one run
    [(6, 0, 6)]
    >>> list(_runs((2, 4), (0, 2), (2, 2), 1))  # columns 2-3: one run per row
    [(2, 0, 2), (6, 2, 2)]
    """
    ndim = len(full)
    if ndim == 0:
        yield 0, 0, itemsize
        return
    k = ndim - 1
    while k > 0 and sizes[k] == full[k] and offsets[k] == 0:
        k -= 1
    inner = math.prod(full[k + 1:]) * itemsize  # bytes of one step along dim k
    length = sizes[k] * inner
    strides = [math.prod(full[d + 1:]) * itemsize for d in range(ndim)]
    done = 0
    for index in _product([range(offsets[d], offsets[d] + sizes[d]) for d in range(k)]):
        start = sum(i * strides[d] for d, i in enumerate(index)) + offsets[k] * strides[k]
        yield start, done, length
        done += length


def _product(ranges: list[range]) -> Iterator[tuple[int, ...]]:
    if not ranges:
        yield ()
        return
    for i in ranges[0]:
        for rest in _product(ranges[1:]):
            yield (i, *rest)


def _bytes_of(tensor: Any) -> memoryview:
    """A tensor's bytes in C order, without a copy when it is contiguous already."""
    import torch

    flat = tensor.contiguous().reshape(-1).view(torch.uint8).numpy()
    return memoryview(flat.data).cast("B")


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def consolidate_dcp(src: Path, out: Path, *, max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
                    strip_prefix: str | None = None,
                    progress: Callable[[int], None] | None = None) -> Converted:
    """The tensors of the DCP checkpoint in ``src`` as safetensors in ``out`` (see the module).

    Every saved chunk is checked against ``.metadata`` (its file and byte range inside the
    checkpoint, its shape and dtype) and every byte of every tensor is written exactly once.
    ``progress`` is called with each chunk's byte count as it is written.
    """
    import torch

    with open(src / METADATA, "rb") as fh:
        metadata = read_metadata(fh)
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, TensorStorageMetadata

    specs: list[TensorSpec] = []
    sources: dict[str, str] = {}  # output name -> fqn
    left_out: list[str] = []
    for fqn, md in metadata.state_dict_metadata.items():
        if isinstance(md, BytesStorageMetadata):
            left_out.append(f"{fqn}: not a tensor (a pickled object)")
            continue
        if not isinstance(md, TensorStorageMetadata):
            raise CkptError(f"{METADATA} describes {one_line(fqn, 80)} as neither a tensor nor bytes")
        name = _out_name(fqn, strip_prefix)
        if name is None:
            left_out.append(f"{fqn}: outside --strip-prefix {strip_prefix}")
            continue
        if name in sources:
            raise CkptError(f"{one_line(fqn, 80)} and {one_line(sources[name], 80)} are both {one_line(name, 80)}"
                            " once the prefix is stripped: choose another --strip-prefix")
        dtype = md.properties.dtype
        shape = tuple(int(d) for d in md.size)
        itemsize = torch.empty((), dtype=dtype).element_size()
        specs.append(TensorSpec(name, shape, _dtype_tag(dtype, fqn), math.prod(shape) * itemsize))
        sources[name] = fqn
    if not specs:
        raise CkptError(f"the DCP checkpoint holds no tensor{' under ' + strip_prefix if strip_prefix else ''}:"
                        " nothing to write as a model")
    shards = shard_plan(specs, max_shard_size)
    out.mkdir(parents=True, exist_ok=True)
    where = _write_layout(out, shards)
    by_fqn = {fqn: spec for spec in specs for fqn in [sources[spec.name]]}
    # Chunks grouped by the file that holds them, each file read in offset order.
    items: dict[str, list[tuple[int, int, Any, TensorSpec]]] = {}
    covered: dict[str, int] = {}
    for index, info in metadata.storage_data.items():
        spec = by_fqn.get(index.fqn)
        if spec is None:
            continue
        if getattr(info, "transform_descriptors", None):
            raise CkptError(f"{one_line(index.fqn, 80)} is stored with transforms"
                            f" ({one_line(info.transform_descriptors, 80)}), which --as-model does not read")
        items.setdefault(relative_path(info.relative_path), []).append((int(info.offset), int(info.length),
                                                                        index, spec))
    fds: dict[Path, int] = {}
    try:
        for rel in sorted(items):
            path = src / rel
            if not path.is_file():
                raise CkptError(f"{METADATA} names {one_line(rel, 80)}, which this checkpoint does not hold")
            size = path.stat().st_size
            with open(path, "rb") as fh:
                for offset, length, index, spec in sorted(items[rel], key=lambda i: i[0]):
                    if offset < 0 or length < 0 or offset + length > size:
                        raise CkptError(f"{METADATA} places {one_line(index.fqn, 80)} past the end of {rel}")
                    fh.seek(offset)
                    blob = fh.read(length)
                    chunk = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
                    del blob
                    covered[spec.name] = covered.get(spec.name, 0) + _place(chunk, index, spec, where, fds, metadata)
                    if progress is not None:
                        progress(chunk.numel() * chunk.element_size())
                    del chunk
    finally:
        for fd in fds.values():
            os.close(fd)
    for spec in specs:
        if covered.get(spec.name, 0) != spec.nbytes:
            raise CkptError(f"the saved chunks of {one_line(sources[spec.name], 80)} cover"
                            f" {covered.get(spec.name, 0)} of its {spec.nbytes} bytes: the checkpoint is incomplete")
    files = _write_index(out, shards)
    return Converted(files, len(specs), sum(s.nbytes for s in specs), left_out)


def _place(chunk: Any, index: Any, spec: TensorSpec, where: dict[str, tuple[Path, int]], fds: dict[Path, int],
           metadata: Any) -> int:
    """Write one loaded chunk at its place; the bytes written."""
    import torch

    md = metadata.state_dict_metadata[index.fqn]
    offsets = tuple(int(o) for o in (index.offset or ()))
    found = next((c for c in md.chunks if tuple(int(o) for o in c.offsets) == offsets), None)
    if (not isinstance(chunk, torch.Tensor) or found is None
            or tuple(chunk.shape) != tuple(int(s) for s in found.sizes) or chunk.dtype != md.properties.dtype):
        raise CkptError(f"a saved chunk of {one_line(index.fqn, 80)} is not what {METADATA} says"
                        " (shape, dtype or offset): the checkpoint is damaged")
    sizes = tuple(int(s) for s in found.sizes)
    if len(offsets) != len(spec.shape) or any(o + s > f for o, s, f in zip(offsets, sizes, spec.shape, strict=True)):
        raise CkptError(f"a saved chunk of {one_line(index.fqn, 80)} lies outside the tensor: the checkpoint is"
                        " damaged")
    path, base = where[spec.name]
    fd = fds.get(path)
    if fd is None:
        fd = fds[path] = os.open(path, os.O_WRONLY)
    raw = _bytes_of(chunk)
    written = 0
    for at, start, length in _runs(spec.shape, offsets, sizes, chunk.element_size()):
        _pwrite_all(fd, raw[start:start + length], base + at)
        written += length
    return written


def convert_bin(src: Path, names: Iterable[str], out: Path, *, max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
                strip_prefix: str | None = None) -> Converted:
    """The tensors of the ``.bin`` weights files ``names`` (in ``src``) as safetensors in ``out``.

    Each file is read with ``torch.load(weights_only=True)``: a file that needs more (any
    object but tensors and containers of them) is refused, never loaded unrestricted.
    Tensors that share storage (tied weights) are written once each, as copies.
    """
    import torch

    tensors: dict[str, Any] = {}
    sources: dict[str, str] = {}
    left_out: list[str] = []
    for rel in names:
        try:
            state = torch.load(src / rel, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # noqa: BLE001 - torch's UnpicklingError, or anything the bytes provoke
            why = next((line for line in str(exc).splitlines() if "unsupported" in line.lower()), str(exc))
            raise CkptError(f"{rel} is not loaded: torch.load(weights_only=True) refuses it"
                            f" ({one_line(why, 200)}); save the weights as safetensors") from None
        if not isinstance(state, dict):
            raise CkptError(f"{rel} holds no state dict of tensors: save the weights as safetensors")
        for key, value in state.items():
            if not isinstance(value, torch.Tensor):
                left_out.append(f"{rel}: {key}: not a tensor")
                continue
            name = _out_name(str(key), strip_prefix)
            if name is None:
                left_out.append(f"{rel}: {key}: outside --strip-prefix {strip_prefix}")
                continue
            if name in sources:
                raise CkptError(f"{one_line(name, 80)} is in {sources[name]} and {rel}: the weights files overlap")
            tensors[name], sources[name] = value, rel
    if not tensors:
        raise CkptError("the .bin weights hold no tensor: nothing to write as a model")
    specs = [TensorSpec(n, tuple(t.shape), _dtype_tag(t.dtype, n), t.numel() * t.element_size())
             for n, t in tensors.items()]
    shards = shard_plan(specs, max_shard_size)
    out.mkdir(parents=True, exist_ok=True)
    where = _write_layout(out, shards)
    fds: dict[Path, int] = {}
    try:
        for spec in specs:
            path, base = where[spec.name]
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_WRONLY)
            if spec.nbytes:
                raw = _bytes_of(tensors[spec.name])
                _pwrite_all(fd, raw, base)
    finally:
        for fd in fds.values():
            os.close(fd)
    return Converted(_write_index(out, shards), len(specs), sum(s.nbytes for s in specs), left_out)
