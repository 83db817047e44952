"""The files of a local checkpoint dir: one walk, used by push's up-front check and by every
re-scan while it pushes.

The dir is untrusted while it is read: a job (or anything sharing the runner) may write
into it during the push. So the walk never follows a link it has not checked, looks at
each entry with ``lstat``, keeps no recursion (a deep tree cannot exhaust the stack) and
stops past :data:`~ckpt_action.names.MAX_PUSH_DEPTH` levels and
:data:`~ckpt_action.names.MAX_PUSH_FILES` files. Readers open what it returns with
:func:`open_regular`, which refuses a link or a special file that took a file's place.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ckpt_action.errors import InputError, one_line, param
from ckpt_action.names import MAX_PUSH_DEPTH, MAX_PUSH_FILES, file_name_problem

# Windows has neither flag; there the lstat of the walk and the realpath check below remain.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
# How messages name the dir: the parameter, as each door spells it (--local-dir, local_dir=).
_DIR = param("local_dir")


def local_files(root: Path) -> dict[str, Path]:
    """Every file under ``root``, keyed by posix path relative to it, each checked.

    A file is a regular file, or a link to a regular file inside ``root``; each maps to its
    real path (a link's target), so no later read goes through a link; anything else (a link out of
    the dir, a dangling link, a linked dir, a FIFO, socket or device, an unreadable file, a
    name the Hub or ckpt-action's readers refuse, a ``.git`` entry, nesting past
    MAX_PUSH_DEPTH, more than MAX_PUSH_FILES files) raises :class:`InputError` naming it.
    """
    real_root = Path(os.path.realpath(root))
    files: dict[str, Path] = {}
    pending: list[tuple[Path, str, int]] = [(root, "", 0)]
    while pending:
        here, prefix, depth = pending.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"{_DIR} cannot be read ({exc.filename}: {exc.strerror}): fix its permissions") \
                from None
        for entry in entries:
            rel = prefix + entry.name
            problem = file_name_problem(entry.name)
            if problem:
                raise InputError(f"{_DIR} has a file name push does not take ({rel!r}: {problem}; the"
                                 " readers of a checkpoint refuse it too): rename it")
            if entry.name == ".git":
                raise InputError(f"{_DIR} holds {rel!r}, which the Hub refuses in a repo: push the checkpoint"
                                 " without its '.git' dir")
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone since it was listed: the next re-scan sees the dir as it is
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_PUSH_DEPTH:
                    raise InputError(f"{_DIR} nests {rel!r} more than {MAX_PUSH_DEPTH} levels deep:"
                                     " push a flatter checkpoint")
                pending.append((Path(entry.path), rel + "/", depth + 1))
                continue
            # Real paths throughout: open_regular can then tell a link that appears in a parent.
            path = _link_target(real_root, Path(entry.path), rel) if stat.S_ISLNK(st.st_mode) else real_root / rel
            if not stat.S_ISLNK(st.st_mode) and not stat.S_ISREG(st.st_mode):
                raise InputError(f"{_DIR} has {rel}, which is not a regular file (a FIFO, socket or device):"
                                 " remove it from the checkpoint")
            if not os.access(path, os.R_OK):
                raise InputError(f"{_DIR} has {rel}, which cannot be read: fix its permissions")
            files[rel] = path
            if len(files) > MAX_PUSH_FILES:
                raise InputError(f"{_DIR} holds more than {MAX_PUSH_FILES} files, more than a Hub repo takes:"
                                 " push a smaller folder")
    return dict(sorted(files.items()))


def _link_target(real_root: Path, link: Path, rel: str) -> Path:
    """The real path of a link to a regular file inside the dir; else InputError."""
    target = Path(os.path.realpath(link))
    try:
        st = os.lstat(target)
    except OSError:
        raise InputError(f"{_DIR} has a dangling symlink {rel}: remove it or restore its target") from None
    if target != real_root and real_root not in target.parents:
        raise InputError(f"{_DIR} has a symlink {rel} pointing outside the checkpoint: copy the file in"
                         " or remove the link")
    if stat.S_ISDIR(st.st_mode):
        # Never followed (a loop, or files counted twice): say so rather than skip it.
        raise InputError(f"{_DIR} has a symlinked directory {rel}: copy it in or remove the link")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{_DIR} has {rel}, which is not a regular file (a FIFO, socket or device):"
                         " remove it from the checkpoint")
    return target


def open_regular(path: str | os.PathLike[str]) -> int:
    """Open a file the walk returned for reading, refusing what took its place since: a
    link (``O_NOFOLLOW``; a link in a parent is caught by the real path), or a FIFO or
    device (``O_NONBLOCK`` so opening one cannot hang, then ``fstat``). Returns the fd."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError:
        if os.path.islink(name):
            raise InputError(f"{_DIR}: {name} became a symlink while it was pushed: push a dir nothing"
                             " writes into") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or os.path.realpath(name) != os.path.abspath(name):
        os.close(fd)
        raise InputError(f"{_DIR}: {name} became a symlink or special file while it was pushed: push a dir"
                         " nothing writes into")
    if _NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def read_bounded(path: str | os.PathLike[str], limit: int, name: str, what: str, *, regular_hint: str,
                 large_hint: str) -> bytes:
    """The bytes of a file a user named (a pointer, a key, a certificate chain, a trust
    config): a regular file only, at most ``limit`` bytes read whatever it claims its size is.

    Opened non-blocking, then ``fstat``: a FIFO, ``/dev/zero`` or a link to one is refused
    before a byte is read, so it can neither hang the command nor fill its memory. Errors
    are :class:`InputError` naming the parameter ``name`` that gave the file (``what`` says
    what it should be; the hints say what to change)."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{param(name)}: {what} not found: {p}", param=name) from None
    except OSError as exc:
        raise InputError(f"{param(name)}: cannot read {what} {p}: {type(exc).__name__}: {one_line(exc)}",
                         param=name) from None
    with open(fd, "rb", buffering=0) as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{param(name)}: invalid {what} {p}: not a regular file (a FIFO, device or"
                             f" directory): {regular_hint}", param=name)
        try:
            raw = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{param(name)}: cannot read {what} {p}: {type(exc).__name__}: {one_line(exc)}",
                             param=name) from None
    if raw is None or len(raw) > limit:
        raise InputError(f"{param(name)}: invalid {what} {p}: more than {limit} bytes, {large_hint}", param=name)
    return bytes(raw)
