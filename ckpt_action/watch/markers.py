"""When is a checkpoint complete? What each framework writes last, read from its source.

- ``trainer`` (transformers ``Trainer._save_checkpoint``, 5.x): writes straight into
  ``checkpoint-N`` (no temporary dir): the model, ``training_args.bin``, the optimizer,
  scheduler and RNG state, then ``trainer_state.json`` last (on each node's local main
  process with ``save_on_each_node``). Complete: ``trainer_state.json`` is there and is
  a whole JSON object (it is written in place, so a torn one does not parse).
- ``accelerate`` (``Accelerator.save_state`` -> ``save_accelerator_state``, 1.x): the
  weights, optimizer, scheduler, sampler and scaler files, then ``random_states_<rank>.pkl``
  of every process, then ``custom_checkpoint_<i>.pkl`` of registered objects. No file is
  renamed into place: complete when ``random_states_0.pkl`` is a whole ``torch.save`` zip
  (its central directory, written last, reads) and the folder then stays quiet.
- ``lightning`` (``ModelCheckpoint`` -> ``TorchCheckpointIO`` -> ``_atomic_save``, 2.x): one
  file per checkpoint (``epoch=E-step=S.ckpt``): ``torch.save`` into memory, then an fsspec
  transaction writes a temporary file (in the system's temp dir) and moves it into place on
  commit (``shutil.move``: a rename, or a copy across filesystems). Complete: the file under
  its name is a whole ``torch.save`` zip.
- ``dcp`` (``torch.distributed.checkpoint.FileSystemWriter.finish``, torch 2.x): every rank's
  ``__<rank>_<n>.distcp`` data files, then the coordinator (once every rank's writes are
  gathered) writes ``.metadata.tmp``, fsyncs it, removes an older ``.metadata`` and renames the
  tmp file to ``.metadata``. Complete: ``.metadata`` is there. Saved with
  ``use_collectives=False`` there is no coordinator: each rank renames its own
  ``__<rank>.metadata.tmp`` to ``__<rank>.metadata`` (the loader reads rank 0's); complete
  when ``__0.metadata`` is there and so is the metadata of every rank whose data files are
  (a rank that has not begun writing cannot be seen: the folder's quiet period covers it).
- ``orbax`` (``AtomicRenameTemporaryPath`` / ``CommitFileTemporaryPath``, 0.12): saves into
  ``<step>.orbax-checkpoint-tmp*`` and renames it to ``<step>``, or (where rename is not
  atomic) saves under ``<step>``; either way ``finalize`` adds ``commit_timestamp_nsecs`` to
  ``_CHECKPOINT_METADATA``, then writes ``commit_success.txt`` (before the rename, in the tmp
  dir, in the first mode; last in the second; older releases wrote it in the second only).
  Complete: under its final name, with ``commit_success.txt``, or with its metadata's
  commit time, or (no metadata at all) by the rename alone.
- ``plain``: no marker; complete after a quiet period (``--settle``).

Each rule is held to the real library in tests/integration/test_watch_*.py (the Trainer,
accelerate, DCP, Lightning, Orbax) and to a replay of its write order in
tests/unit/test_watch_markers.py.

Which framework a dir holds is told from what its checkpoints hold (:func:`detect`), or
named (``--format``). Once a dir's checkpoints carry a framework's marker, a folder
without it is incomplete however long it stays quiet.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

# Opening a marker never waits for a writer: a FIFO or device that took a file's place since
# the scan's lstat is opened non-blocking, then refused by its fstat (Windows has neither flag).
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
MARKER_MAX_BYTES = 64 * 1024 * 1024
"""A marker file read whole (``trainer_state.json``, Orbax's metadata) is read up to this size."""

FORMATS = ("auto", "trainer", "accelerate", "lightning", "dcp", "orbax", "plain")
"""The names ``--format`` takes; ``auto`` tells them from the dir."""

DEFAULT_PATTERNS = {
    "auto": r"checkpoint[-_](\d+)",
    "trainer": r"checkpoint-(\d+)",
    "accelerate": r"checkpoint_(\d+)",
    "lightning": r"(?:.*-)?step=(\d+)(?:-.*)?\.ckpt",
    "dcp": r"(?:checkpoint|step)[-_](\d+)",
    "orbax": r"(\d+)",
    "plain": r"checkpoint-(\d+)",
}
"""The folder (or file) names each framework saves under by default; ``--pattern`` overrides."""

# Files only one framework writes (a folder that holds one is that framework's).
_SIGNS: dict[str, tuple[str, ...]] = {
    "dcp": (r".*\.distcp", r"\.metadata(\.tmp)?", r"__\d+\.metadata"),
    "orbax": (r"_CHECKPOINT_METADATA", r"commit_success\.txt", r"_METADATA", r"_sharding", r"manifest\.ocdbt"),
    "trainer": (r"trainer_state\.json", r"training_args\.bin", r"rng_state(_\d+)?\.pth", r"optimizer\.pt",
                r"scheduler\.pt"),
    "accelerate": (r"random_states_\d+\.pkl", r"optimizer(_\d+)?\.bin", r"scheduler(_\d+)?\.bin",
                   r"sampler(_\d+)?\.bin", r"custom_checkpoint_\d+\.pkl"),
}
_SIGN_RES = {fmt: re.compile("|".join(f"(?:{s})" for s in signs)) for fmt, signs in _SIGNS.items()}
ORBAX_TMP = re.compile(r".*\.orbax-checkpoint-tmp.*")


def framework_of(names: Iterable[str], *, is_file: bool = False) -> str | None:
    """The framework one checkpoint's file names (or, for a file checkpoint, its own name)
    say it is, or None when they say nothing yet.

    >>> framework_of(["model.safetensors", "training_args.bin"])
    'trainer'
    >>> framework_of(["__0_0.distcp"])
    'dcp'
    >>> framework_of(["model.safetensors"]) is None
    True
    """
    names = list(names)
    if is_file:
        return "lightning" if any(n.endswith(".ckpt") for n in names) else None
    for fmt, sign in _SIGN_RES.items():
        if any(sign.fullmatch(n) for n in names):
            return fmt
    return None


def detect(found: Iterable[str | None]) -> str | None:
    """The dir's framework from each checkpoint's own (:func:`framework_of`): the first one
    any checkpoint shows, in the order of ``_SIGNS`` (lightning first), None if none does."""
    seen = {f for f in found if f}
    for fmt in ("lightning", *_SIGNS):
        if fmt in seen:
            return fmt
    return None


def open_file(path: Path) -> int | None:
    """A descriptor on ``path`` if it is a regular file (not a link, FIFO, socket or device),
    else None. Never blocks: the scan's ``lstat`` saw a file, but a FIFO may have taken its
    place since, and a blocking open of one waits for a writer that may never come (a stop's
    grace period with it)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        return None
    return fd


def _read(path: Path, limit: int) -> bytes | None:
    fd = open_file(path)
    if fd is None:
        return None
    try:
        with open(fd, "rb", buffering=0) as fh:
            return fh.read(limit)
    except OSError:
        return None


def whole_zip(path: Path) -> bool:
    """``torch.save``'s zip format ends with the central directory: a file cut short has none."""
    import zipfile  # only once a checkpoint is looked at: the CLI's start does not pay for it

    fd = open_file(path)
    if fd is None:
        return False
    try:
        with open(fd, "rb") as fh, zipfile.ZipFile(fh) as zf:
            return bool(zf.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def _json_object(path: Path) -> dict[str, object] | None:
    data = _read(path, MARKER_MAX_BYTES + 1)
    if data is None or len(data) > MARKER_MAX_BYTES:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _commit_success(path: Path) -> bool:
    """Orbax's commit file, whole: "Checkpoint commit was successful to <the folder's path>"."""
    data = _read(path, 4096)
    if data is None:
        return False
    text = data.decode("utf-8", "replace").rstrip()
    return "commit was successful to " in text and text.endswith(path.parent.name)


_DCP_DATA = re.compile(r"__(\d+)_\d+\.distcp")
_DCP_RANK_METADATA = re.compile(r"__(\d+)\.metadata")


def _dcp_finished(path: Path) -> tuple[bool, str]:
    """DCP's ``.metadata``, or with rank-local metadata (``use_collectives=False``) that of
    rank 0 and of every rank with data files in the folder."""
    if (path / ".metadata").is_file():
        return True, ""
    try:
        names = os.listdir(path)
    except OSError:
        names = []
    ranks = {m.group(1) for m in map(_DCP_RANK_METADATA.fullmatch, names) if m}
    if "0" in ranks:
        writing = {m.group(1) for m in map(_DCP_DATA.fullmatch, names) if m} - ranks
        if not writing:
            return True, ""
        return False, f"no __{min(writing, key=int)}.metadata yet (that rank renames it into place last)"
    return False, "no .metadata yet (torch.distributed.checkpoint renames it into place last)"


def has_marker(fmt: str, path: Path, *, commit_files: bool = False) -> tuple[bool, str]:
    """Whether ``path`` (a checkpoint folder, or file for ``lightning``) carries ``fmt``'s
    save-finished marker, and if not, what is missing (for the log).

    ``commit_files``: another checkpoint of the dir has Orbax's ``commit_success.txt``, so
    the dir's saves are finalized by that file (written after the metadata's commit time)."""
    if fmt == "trainer":
        state = _json_object(path / "trainer_state.json")
        if state is None or "global_step" not in state:
            return False, "no whole trainer_state.json yet (the Trainer writes it last)"
        return True, ""
    if fmt == "accelerate":
        if not whole_zip(path / "random_states_0.pkl"):
            return False, "no whole random_states_0.pkl yet (save_state writes it after the weights)"
        return True, ""
    if fmt == "lightning":
        if not path.is_file() or not whole_zip(path):
            return False, "not a whole checkpoint file yet"
        return True, ""
    if fmt == "dcp":
        return _dcp_finished(path)
    if fmt == "orbax":
        if ORBAX_TMP.fullmatch(path.name):
            return False, "still under its temporary name"
        if _commit_success(path / "commit_success.txt"):
            return True, ""
        if commit_files:
            return False, "no commit_success.txt yet (Orbax writes it last)"
        meta_path = path / "_CHECKPOINT_METADATA"
        if meta_path.exists():
            meta = _json_object(meta_path)
            if meta is None or not meta.get("commit_timestamp_nsecs"):
                return False, "_CHECKPOINT_METADATA has no commit time yet"
        return True, ""
    return True, ""


def survey(path: Path) -> tuple[dict[str, tuple[int, int]] | None, str | None]:
    """Every file under ``path`` (or ``path`` itself, a file) with its size and mtime in ns,
    and what makes it a checkpoint watch will not push (None if nothing does).

    Each entry is looked at with ``lstat``, nothing is opened: a FIFO, socket or device is a
    refusal (opening one could hang), and so is a link out of the checkpoint (what it points
    to is not the training's to publish); a link inside it is recorded by what it points to,
    as a push reads it. The snapshot is None when the checkpoint is gone or cannot be read
    whole (a rotation deleting it, permissions)."""
    try:
        top = os.lstat(path)
        if stat.S_ISREG(top.st_mode):
            return {"": (top.st_size, top.st_mtime_ns)}, None
        if not stat.S_ISDIR(top.st_mode):
            return None, None
        real = os.path.realpath(path)
        out: dict[str, tuple[int, int]] = {}
        problem: str | None = None
        pending = [(os.fspath(path), "")]
        while pending:
            here, prefix = pending.pop()
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                rel = prefix + entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    pending.append((entry.path, rel + "/"))
                    continue
                if stat.S_ISLNK(st.st_mode):
                    target = os.path.realpath(entry.path)
                    if os.path.commonpath([real, target]) != real:
                        problem = problem or f"it holds {rel}, a link to {target}, outside the checkpoint"
                        continue
                    st = os.stat(target)
                if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
                    problem = problem or f"it holds {rel}, which is not a regular file (a FIFO, socket or device)"
                    continue
                out[rel] = (st.st_size, st.st_mtime_ns)
        return out, problem
    except (OSError, ValueError):  # gone, or going, or unreadable: not complete now
        return None, None


def snapshot(path: Path) -> dict[str, tuple[int, int]] | None:
    """:func:`survey`'s snapshot of ``path``."""
    return survey(path)[0]
