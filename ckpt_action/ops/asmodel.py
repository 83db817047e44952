"""promote --as-model: which files of a training checkpoint make a ``from_pretrained`` folder.

A Trainer, accelerate or PEFT checkpoint holds what ``from_pretrained`` reads (weights in
safetensors, config, generation config, tokenizer and processor files, model card,
license) beside what only a resumed training reads (optimizer, scheduler, RNG states,
trainer state, training arguments), most of those pickles. :func:`select` sorts a
checkpoint's files into kept, converted and left out, each left-out file with why; only
named kinds are kept, so a file nobody listed (custom code, a pickle under any name)
stays out. Kept files are copied server-side; weights that are not safetensors (a DCP
checkpoint's shards, ``.bin`` pickles) are converted
(:mod:`ckpt_action.checkpoint.consolidate`), after the download verified them against
the checkpoint's manifest.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ckpt_action.checkpoint.consolidate import DEFAULT_MAX_SHARD_SIZE, Converted
from ckpt_action.checkpoint.dcpmeta import METADATA
from ckpt_action.errors import CkptError, InputError, param, quoted

_KEEP = (
    # weights
    "model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json",
    "adapter_model.safetensors",
    # configs
    "config.json", "generation_config.json", "adapter_config.json", "preprocessor_config.json",
    "processor_config.json", "video_preprocessor_config.json", "feature_extractor_config.json",
    "chat_template.json", "chat_template.jinja",
    # tokenizer
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
    "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
    # model card and license
    "README.md", "LICENSE", "LICENSE.txt", "LICENSE.md", "NOTICE", "COPYING",
)
_BIN_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*-of-*.bin", "adapter_model.bin")
_BIN_INDEX = "pytorch_model.bin.index.json"
_DCP_SHARD = re.compile(r"__\d+_\d+\.distcp")
_TRAINING = {
    "optimizer": "optimizer state", "scheduler": "scheduler state", "rng_state": "RNG state",
    "random_states": "RNG state", "scaler": "gradient scaler state", "trainer_state.json": "trainer state",
    "training_args.bin": "training arguments",
}
_PICKLES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")


@dataclass(frozen=True)
class ModelSelection:
    """A checkpoint's files as a release folder takes them."""

    keep: tuple[str, ...]
    """Copied as they are (server-side in the same repo)."""
    convert: tuple[str, ...]
    """Read to write safetensors: DCP's ``.metadata`` and shards, or ``.bin`` weights."""
    kind: str
    """``safetensors`` (nothing to convert), ``dcp`` or ``bin``."""
    left_out: tuple[tuple[str, str], ...]
    """Each file left out, with why."""

    def left_out_names(self) -> list[str]:
        return [rel for rel, _why in self.left_out]


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _why_left_out(rel: str) -> str:
    base = posixpath.basename(rel)
    for prefix, what in _TRAINING.items():
        if base.startswith(prefix):
            return what
    if base.lower().endswith(_PICKLES):
        return "a pickle"
    if "/" in rel:
        return "not at the top of the checkpoint, where from_pretrained reads"
    return "not a file from_pretrained reads"


def select(files: list[str]) -> ModelSelection:
    """Sort a checkpoint's files (paths inside its folder, ckpt-action's own left aside).

    >>> s = select(["model.safetensors", "config.json", "optimizer.pt", "rng_state.pth", "tokenizer.json",
    ...             "trainer_state.json", "training_args.bin", "scheduler.pt"])
    >>> s.kind, s.keep, s.convert
    ('safetensors', ('config.json', 'model.safetensors', 'tokenizer.json'), ())
    >>> dict(s.left_out)["optimizer.pt"], dict(s.left_out)["training_args.bin"]
    ('optimizer state', 'training arguments')
    >>> s = select([".metadata", "__0_0.distcp", "__1_0.distcp", "config.json"])
    >>> s.kind, s.keep, s.convert
    ('dcp', ('config.json',), ('.metadata', '__0_0.distcp', '__1_0.distcp'))
    """
    top = [rel for rel in sorted(files) if "/" not in rel]
    has_safetensors = any(_matches(rel, ("model.safetensors", "model-*-of-*.safetensors",
                                         "adapter_model.safetensors")) for rel in top)
    dcp = METADATA in top and any(_DCP_SHARD.fullmatch(rel) for rel in top)
    bins = [rel for rel in top if _matches(rel, _BIN_WEIGHTS)]
    keep: list[str] = []
    convert: list[str] = []
    left: list[tuple[str, str]] = []
    for rel in sorted(files):
        if "/" not in rel and _matches(rel, _KEEP):
            keep.append(rel)
        elif dcp and not has_safetensors and (rel == METADATA or _DCP_SHARD.fullmatch(rel)):
            convert.append(rel)
        elif not dcp and not has_safetensors and rel in bins:
            convert.append(rel)
        elif rel in bins:
            left.append((rel, "a pickle; the safetensors weights beside it are kept"))
        elif rel == _BIN_INDEX:
            left.append((rel, "the index of .bin weights" + (", written anew for the converted ones" if bins else "")))
        elif rel == METADATA or _DCP_SHARD.fullmatch(rel):
            left.append((rel, "DCP shards; the safetensors weights beside them are kept"))
        else:
            left.append((rel, _why_left_out(rel)))
    kind = "safetensors" if not convert else ("dcp" if dcp else "bin")
    if not has_safetensors and not convert:
        raise CkptError("this checkpoint holds no weights a model folder takes (model.safetensors, its shards,"
                        " adapter_model.safetensors, .bin weights or a DCP checkpoint): promote it without"
                        " --as-model")
    return ModelSelection(tuple(keep), tuple(convert), kind, tuple(left))


_SIZE = re.compile(r"([0-9]{1,18})\s*([KMGT]i?B|B)?", re.IGNORECASE | re.ASCII)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def shard_size(value: int | str | None, name: str = "max_shard_size") -> int:
    """``max_shard_size`` in bytes: an int, or ``"5GB"``, ``"500MB"``, ``"2GiB"`` (decimal
    units as transformers reads them, binary ones with ``i``); None is 5 GB.

    >>> shard_size("5GB"), shard_size("100KiB"), shard_size(1000), shard_size(None)
    (5000000000, 102400, 1000, 5000000000)
    """
    if value is None:
        return DEFAULT_MAX_SHARD_SIZE
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        found = _SIZE.fullmatch(str(value).strip())
        if not found:
            raise InputError(f"{param(name)} {quoted(str(value), 40)} is not a size: give bytes or a number with"
                             " KB, MB, GB (or KiB, MiB, GiB), in ASCII digits 0-9", param=name)
        size = int(found.group(1)) * _UNITS[(found.group(2) or "B").upper()]
    if size < 1:
        raise InputError(f"{param(name)} must be at least 1 byte", param=name)
    return size


def build(selection: ModelSelection, src: Path, out: Path, *, max_shard_size: int,
          strip_prefix: str | None) -> Converted | None:
    """The release folder in ``out`` from the files downloaded (and verified) into ``src``:
    the kept files moved over, the weights converted. None when nothing was converted."""
    from ckpt_action.checkpoint.consolidate import consolidate_dcp, convert_bin

    out.mkdir(parents=True, exist_ok=True)
    for rel in selection.keep:
        shutil.move(src / rel, out / rel)
    if selection.kind == "dcp":
        return consolidate_dcp(src, out, max_shard_size=max_shard_size, strip_prefix=strip_prefix)
    if selection.kind == "bin":
        return convert_bin(src, selection.convert, out, max_shard_size=max_shard_size, strip_prefix=strip_prefix)
    return None


def needs_torch() -> None:
    """A conversion runs on torch: without it, say which extra brings it."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InputError("converting these weights to safetensors needs torch: pip install"
                         " 'ckpt-action[distributed]'", param="as_model") from None
