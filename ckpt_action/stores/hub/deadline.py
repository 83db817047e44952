"""A wall-clock deadline on one HTTP request: connect, TLS, headers and body together.

httpx's timeouts are per socket operation, so a server that trickles one byte a second
never trips a 60 s read timeout and holds a request for as long as it likes, headers or
body. Watching from outside (a timer that closes the response) cannot reach the header
phase, where there is no response object yet, and races with the connection pool; a
check between body chunks misses the headers too. The one place every byte of a request
passes is the network stream under httpcore's connection pool, so the deadline lives
there: each socket read, write or connect may wait at most what the request has left,
and once that is spent it raises :class:`RequestDeadline`.

The deadline is per thread and opt-in (``with deadline(60): ...``): reads of refs,
listing pages and manifests are bounded; checkpoint transfers, whose length depends on
their size, keep only the per-read timeout. That per-read timeout (``--timeout``) is
per thread too (``with stall(60): ...``): it is set around each of our calls rather than
on the client, which is huggingface_hub's shared one and may be the user's, so their own
requests keep the timeouts they configured. :func:`install` puts the stream wrapper
under an ``httpx2.Client``; it reaches through two private attributes (the transport's
``_pool`` and the pool's ``_network_backend``), which the pinned versions have and the
tests check by trickling a real server's answers.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)
_local = threading.local()


class RequestDeadline(TimeoutError):
    """A request outlived its wall-clock deadline (a stuck or trickling server).

    ``bound`` names the bound and the setting that raises it, for the one-line error.
    """

    def __init__(self, message: str, bound: str | None = None) -> None:
        super().__init__(message)
        self.bound = bound


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound every request this thread makes inside the block to ``seconds`` of wall clock
    (an enclosing, earlier deadline still wins)."""
    outer: float | None = getattr(_local, "at", None)
    at = time.monotonic() + seconds
    _local.at = at if outer is None else min(outer, at)
    try:
        yield
    finally:
        _local.at = outer


_stalls: list[float] = []
_stalls_lock = threading.Lock()


@contextmanager
def stall(seconds: float) -> Iterator[None]:
    """Let no socket operation this thread makes inside the block wait more than ``seconds``
    (connect, or silence between bytes), unless the request asks for less.

    Threads the client starts on its own inside the block (huggingface_hub uploads LFS
    files from a pool of its own) cannot see this thread's setting: while any block is
    open, a thread without one gets the shortest open one. That is the only effect on
    other threads, and it ends with the block.
    """
    outer: float | None = getattr(_local, "stall", None)
    _local.stall = seconds
    with _stalls_lock:
        _stalls.append(seconds)
    try:
        yield
    finally:
        _local.stall = outer
        with _stalls_lock:
            _stalls.remove(seconds)


def _stall_now() -> float | None:
    mine: float | None = getattr(_local, "stall", None)
    if mine is not None:
        return mine
    with _stalls_lock:
        return min(_stalls) if _stalls else None


def _left(timeout: float | None) -> tuple[float | None, bool]:
    """The timeout one socket operation may use, and whether the deadline is what set it."""
    quiet = _stall_now()
    if quiet is not None and (timeout is None or quiet < timeout):
        timeout = quiet
    at: float | None = getattr(_local, "at", None)
    if at is None:
        return timeout, False
    left = at - time.monotonic()
    if left <= 0:
        raise RequestDeadline("the request ran past its deadline")
    return (left, True) if timeout is None or left < timeout else (timeout, False)


@functools.cache
def _wrappers() -> tuple[type, type]:
    import httpcore2

    timeouts = (httpcore2.ReadTimeout, httpcore2.WriteTimeout, httpcore2.ConnectTimeout)

    def bounded(op: Any, timeout: float | None, *args: Any) -> Any:
        limit, by_deadline = _left(timeout)
        try:
            return op(*args, limit)
        except timeouts:
            if by_deadline:
                raise RequestDeadline("the request ran past its deadline") from None
            raise

    class DeadlineStream(httpcore2.NetworkStream):
        def __init__(self, inner: httpcore2.NetworkStream) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return bounded(self.inner.read, timeout, max_bytes)  # type: ignore[no-any-return,unused-ignore]

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            bounded(self.inner.write, timeout, buffer)

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore2.NetworkStream:
            return DeadlineStream(bounded(self.inner.start_tls, timeout, ssl_context, server_hostname))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class DeadlineBackend(httpcore2.NetworkBackend):
        def __init__(self, inner: httpcore2.NetworkBackend) -> None:
            self.inner = inner

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
            return DeadlineStream(bounded(
                lambda t: self.inner.connect_tcp(host, port, t, local_address, socket_options), timeout))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
            return DeadlineStream(bounded(lambda t: self.inner.connect_unix_socket(path, t, socket_options), timeout))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return DeadlineStream, DeadlineBackend


def install(client: Any) -> bool:
    """Put the deadline under every transport of an ``httpx2.Client`` (the direct one and
    any proxy mounts). False, with a warning, when a transport has no pool to wrap."""
    _stream, backend_class = _wrappers()
    transports = [client._transport, *client._mounts.values()]
    ok = True
    for transport in transports:
        if transport is None:  # a NO_PROXY entry
            continue
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            ok = False
            continue
        if not isinstance(backend, backend_class):
            pool._network_backend = backend_class(backend)  # type: ignore[union-attr]
    if not ok:
        log.warning("cannot bound requests by CKPT_REQUEST_DEADLINE with this httpx2 version:"
                    " only the per-read timeout applies")
    return ok
