"""The local dir of a push: checked whole before anything is sent.

Special files would hang the hashing (a FIFO) or cannot be uploaded; finding them half-way
through a push would leave it unfinished, so every entry is looked at up front.
"""

from __future__ import annotations

from pathlib import Path

from ckpt_action.checkpoint.localfiles import local_files
from ckpt_action.errors import InputError, param


def local_dir_to_push(value: str | None) -> Path:
    """Check a checkpoint dir to push, before anything is sent: it exists and holds files,
    and every entry is a regular file (or a link to one inside the dir) that can be read,
    with a name the Hub and ckpt-action's readers accept, no ``.git`` and no deeper
    nesting than the walk allows (:func:`~ckpt_action.checkpoint.localfiles.local_files`,
    the walk every re-scan of the push repeats). Special files would hang the hashing (a
    FIFO) or cannot be uploaded; finding them half-way through a push would leave it
    unfinished.
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
    count = len(local_files(path))
    if not count:
        raise InputError(f"{param('local_dir')} {value} has no files: nothing to push", param='local_dir')
    return path

