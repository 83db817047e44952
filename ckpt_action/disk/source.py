"""The local dir of a push: checked whole before anything is sent.

Special files would hang the hashing (a FIFO) or cannot be uploaded; finding them half-way
through a push would leave it unfinished, so every entry is looked at up front.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ckpt_action.errors import InputError, param
from ckpt_action.names import BAD_NAME_RE, MAX_PUSH_FILES


def local_dir_to_push(value: str | None, *, allow_empty: bool = False) -> Path:
    """Check a checkpoint dir to push, before anything is sent: it exists and holds files
    (``allow_empty``: or none, a rank of a distributed push that holds no file of the checkpoint),
    and every entry is a regular file (or a link to one inside the dir) that can be read,
    with a name the Hub accepts. Special files would hang the hashing (a FIFO) or cannot
    be uploaded; finding them half-way through a push would leave it unfinished.
    """
    if not value:
        raise InputError(f"{param('local_dir')} is required: give the checkpoint directory to push", param='local_dir')
    path = Path(value)
    if not path.exists():
        raise InputError(f"{param('local_dir')} {value} does not exist: point it at the checkpoint"
                         " directory", param='local_dir')
    if not path.is_dir():
        raise InputError(f"{param('local_dir')} {value} is a file: point it at the checkpoint"
                         " directory", param='local_dir')
    root = path.resolve()
    count = 0
    for dirpath, dirnames, filenames in os.walk(path, onerror=_raise_walk_error):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(path).as_posix()
            if BAD_NAME_RE.search(name):
                raise InputError(f"{param('local_dir')} has a file name the Hub refuses ({rel!r}: a backslash"
                                 " or a control"
                                 " character): rename it")
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                if not full.exists():
                    raise InputError(f"{param('local_dir')} has a dangling symlink {rel}: remove it or restore"
                                     " its target", param='local_dir')
                target = full.resolve()
                if target != root and root not in target.parents:
                    raise InputError(
                        f"{param('local_dir')} has a symlink {rel} pointing outside the checkpoint: copy the file in"
                        " or remove the link"
                    )
                if target.is_dir():
                    # Never followed (a loop, or files counted twice): say so rather than skip it.
                    raise InputError(f"{param('local_dir')} has a symlinked directory {rel}: copy it in or"
                                     " remove the link", param='local_dir')
                st = full.stat()
            if name in filenames:
                if not stat.S_ISREG(st.st_mode):
                    raise InputError(f"{param('local_dir')} has {rel}, which is not a regular file (a FIFO,"
                                     " socket or device):"
                                     " remove it from the checkpoint")
                if not os.access(full, os.R_OK):
                    raise InputError(f"{param('local_dir')} has {rel}, which cannot be read: fix its"
                                     " permissions", param='local_dir')
                count += 1
                if count > MAX_PUSH_FILES:
                    raise InputError(f"{param('local_dir')} holds more than {MAX_PUSH_FILES} files, more than"
                                     " a Hub repo takes:"
                                     " push a smaller folder")
    if not count and not allow_empty:
        raise InputError(f"{param('local_dir')} {value} has no files: nothing to push", param='local_dir')
    return path


def _raise_walk_error(exc: OSError) -> None:
    raise InputError(f"{param('local_dir')} cannot be read ({exc.filename}: {exc.strerror}): fix its"
                     " permissions", param='local_dir')
