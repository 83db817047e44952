"""The local dir of a push: checked whole before anything is sent.

Special files would hang the hashing (a FIFO) or cannot be uploaded; finding them half-way
through a push would leave it unfinished, so every entry is looked at up front.
"""

from __future__ import annotations

import os
from pathlib import Path

from ckpt_action.checkpoint.localfiles import local_files
from ckpt_action.checkpoint.manifest import PULL_RECORD_NAME, tool_file
from ckpt_action.disk.target import read_record
from ckpt_action.errors import InputError, param
from ckpt_action.handle import step_of
from ckpt_action.names import reserved_in_target


def local_dir_to_push(value: str | None, *, allow_empty: bool = False) -> Path:
    """Check a checkpoint dir to push, before anything is sent: it exists and holds files
    (``allow_empty``: or none, a rank of a distributed push that holds no file of the checkpoint),
    and every entry is a regular file (or a link to one inside the dir) that can be read,
    with a name the Hub and ckpt-action's readers accept, no ``.git`` and no deeper
    nesting than the walk allows (:func:`~ckpt_action.checkpoint.localfiles.local_files`,
    the walk every re-scan of the push repeats). Special files would hang the hashing (a
    FIFO) or cannot be uploaded; finding them half-way through a push would leave it
    unfinished. A name a pull keeps for its own files (``names.reserved_in_target``) is the
    tool's in a pulled dir (one holding a valid pull record), which the push leaves out,
    and refused in any other.
    """
    if not value:
        raise InputError(f"{param('local_dir')} is required: give the checkpoint directory to push", param='local_dir')
    path = Path(value)
    if not path.exists():
        raise InputError(f"{param('local_dir')} {value} does not exist: point it at the checkpoint"
                         " directory", param='local_dir')
    if not path.is_dir():
        raise InputError(f"{param('local_dir')} {value} is a file: point it at the checkpoint"
                         " directory", param="local_dir")
    _refuse_checkpoint_parent(path, value)
    files = local_files(path)
    reserved = sorted(rel for rel in files if reserved_in_target(rel))
    if reserved and read_record(path) is None:
        raise _reserved_error(reserved[0].split("/", 1)[0])
    count = len(files)
    if not count and not allow_empty:
        raise InputError(f"{param('local_dir')} {value} has no files: nothing to push", param='local_dir')
    return path


def _reserved_error(name: str) -> InputError:
    """A name a pull keeps for its own files, in a dir that is not a pulled one (no valid
    record): a checkpoint holding it could not be pulled, so it is not pushed. Which of the
    user's or an interrupted pull's it is cannot be told, so both ways out are given."""
    if name == PULL_RECORD_NAME:
        return InputError(f"{param('local_dir')} has {name!r}, a name reserved for the record a pull writes inside its"
                          " target, but not a record this ckpt-action can read: delete it if a pull left it (the"
                          " files stay), or rename it if it is your own file", param="local_dir")
    return InputError(f"{param('local_dir')} has {name!r}, a name reserved for what a pull writes inside its target"
                      " (its record, lock and staging dirs), and is not a pulled dir: delete it if an interrupted pull"
                      " left it, or rename it if it is your own", param="local_dir")


def tool_files(path: Path) -> tuple[str, ...]:
    """The names at the top of a checked local dir that push leaves out, as ckpt-action's
    own (:func:`~ckpt_action.checkpoint.manifest.tool_file`): for the one line saying so."""
    try:
        return tuple(sorted(entry.name for entry in os.scandir(path) if tool_file(entry.name)))
    except OSError:
        return ()


def _refuse_checkpoint_parent(path: Path, value: str) -> None:
    """A dir whose top level is only ``checkpoint-N`` dirs is a Trainer ``output_dir``, not a
    checkpoint: pushing it would nest ``checkpoint-400/checkpoint-400/...`` in the repo, which
    ``latest`` would then report as complete. Name the checkpoint to push instead."""
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        raise InputError(f"{param('local_dir')} cannot be read ({exc.filename}: {exc.strerror}): fix its"
                         " permissions", param="local_dir") from None
    steps = []
    for entry in entries:
        step = step_of(entry.name)
        if step is None or not entry.is_dir(follow_symlinks=False):
            return
        steps.append((step, entry.name))
    if steps:
        newest = max(steps)[1]
        raise InputError(f"{param('local_dir')} {value} holds only checkpoint-N folders (a Trainer output_dir):"
                         f" push one of them, e.g. {param('local_dir')} {path / newest}", param="local_dir")
