"""Where a command meets its doors: the one error boundary both doors go through, and the
checks-only run the action's container runtime makes before it creates anything.

Every :class:`~ckpt_action.client.Client` method runs under :func:`boundary`, and the CLI
and ``ckpt.push``/``ckpt.pull``/... call those methods, so an error leaves alike through
either door: our own (:class:`~ckpt_action.errors.CkptError`) as it is, a local I/O failure
as :class:`~ckpt_action.errors.LocalIOError` naming the path and the parameter it is under,
a reference each door spells (``local_dir='out'`` in Python, ``--local-dir 'out'`` on the
command line, ``input 'local-dir'`` in the action).

>>> import errno
>>> exc = local_io_error("pull", PermissionError(errno.EACCES, "Permission denied", "/data/run/x.bin"),
...                      {"local_dir": "/data/run"})
>>> print(exc.render("cli"))  # doctest: +ELLIPSIS
pull: a local file operation failed in --local-dir '/data/run' on /data/run/x.bin (Permission denied): check ...
>>> print(exc)  # doctest: +ELLIPSIS
pull: a local file operation failed in local_dir='/data/run' on /data/run/x.bin (Permission denied): check ...
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from ckpt_action.errors import LocalIOError, param, quoted

PathLike = str | os.PathLike[str]
_F = TypeVar("_F", bound=Callable[..., Any])


def _under(filename: str, root: Path) -> bool:
    """Whether ``filename`` is ``root``, inside it, or beside it (a pull's staging dir and lock)."""
    path = Path(filename)
    return path == root or root in path.parents or path.parent == root.parent


def local_io_error(command: str, exc: OSError, paths: Mapping[str, PathLike | None] = {}) -> LocalIOError:
    """The one translation of a local I/O failure: the command, the path and the failure,
    the parameter it is under (``paths``: a command's path parameters), and what to check."""
    filename = os.fsdecode(exc.filename) if exc.filename is not None else None
    where = f" on {filename}" if filename else ""
    under = ""
    if filename:
        for name, given in paths.items():
            if given is not None and _under(filename, Path(os.path.abspath(os.fspath(given)))):
                under = f" in {param(name)} {quoted(os.fspath(given), 200)}"
                break
    return LocalIOError(f"{command}: a local file operation failed{under}{where} ({exc.strerror or exc}):"
                        " check the permissions and free space there")


def boundary(*path_params: str) -> Callable[[_F], _F]:
    """Where errors leave a command, for both doors: our own as they are, a local I/O failure
    (a file that cannot be read, a dir that cannot be written, a full disk) as
    :class:`LocalIOError` naming the path and which of ``path_params`` it is under. Network
    failures are the transport's to translate (and are RemoteError by then)."""

    def decorate(fn: _F) -> _F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (ConnectionError, TimeoutError):
                raise
            except OSError as exc:
                bound = signature.bind_partial(*args, **kwargs).arguments
                paths = {name: bound.get(name) for name in path_params}
                raise local_io_error(fn.__name__, exc, paths) from exc

        return wrapper  # type: ignore[return-value]

    return decorate


# --------------------------------------------------------------------------- checks only

_CHECKS_ONLY: ContextVar[bool] = ContextVar("ckpt_action_checks_only", default=False)


class InputsChecked(BaseException):
    """Raised in place of a command's first request (to the Hub or W&B) under
    :func:`checks_only`: every check of its inputs passed. A BaseException, so no handler
    for errors takes it for one."""


@contextmanager
def checks_only() -> Iterator[None]:
    """Run a command's steps only up to its first request: every check it makes of its
    inputs (names, bounds, settings, the local dir, key files) runs as in the real run, and
    :class:`InputsChecked` is raised where it would first reach the network or write. The
    action's container runtime validates the step this way before creating any dir."""
    token = _CHECKS_ONLY.set(True)
    try:
        yield
    finally:
        _CHECKS_ONLY.reset(token)


def first_request() -> None:
    """Where a command leaves its checks for the network: the end of a checks-only run."""
    if _CHECKS_ONLY.get():
        raise InputsChecked
