"""One non-blocking exclusive lock on an open file: the data dir's, so two servers never share
one. The local Hub's own copy of ckpt-action's file lock (the local Hub imports nothing of
ckpt-action)."""

from __future__ import annotations


def try_lock(fd: int) -> bool:
    """Lock ``fd`` for this process, without waiting; False when another process holds it.

    POSIX ``flock`` (released when the file is closed, also by a crash); on Windows,
    ``msvcrt``'s lock of the first byte. Other errors (a file system without locks) raise.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
