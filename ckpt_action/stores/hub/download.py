"""Streaming GETs of checkpoint files: socket to buffer to disk, hashed on the way.

Checkpoint bytes are most of what a pull moves, and on a runner with few cores the CPU
spent per byte, not the network, sets the pace. The client library's HTTP/1.1 stack
(httpx2 over h11) copies every body byte three times in Python; the standard library's
``http.client`` reads straight into a caller's buffer. Measured on this project's 2-core
machine for 1 GiB with sha256 (which alone costs 0.9 s): 2.3 s of CPU through the client
library, 1.5 s here. So file bodies take this path, and everything else (listings, the
manifest, commits) stays with the client.

It behaves like the client where it matters:

- TLS trust is the client's (``httpx2.create_ssl_context()``: its CA bundle, and
  ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``);
- redirects are followed (at most 10), and the token is dropped as soon as the origin
  changes, so it only ever goes to the configured endpoint;
- an error status becomes the client's own exception, built from the status, headers
  and the first 64 KiB of the body by ``hf_raise_for_status``, so retries and messages
  are the same as for every other request;
- every socket operation is bounded by the settings' timeout.

When a proxy variable applies (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, minus
``NO_PROXY``), :func:`direct` says no and pull streams through the client instead, which
speaks every proxy kind it supports.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urljoin, urlsplit

from ckpt_action.names import origin_parts

MAX_REDIRECTS = 10
MAX_ERROR_BODY = 64 * 1024
# Smaller buffers stay in the CPU cache between the receive, the write and the hash: on
# the 2-core test machine 1 GiB cost 1.5-2.0 s of CPU with 512 KiB, 2.0-2.4 s with 1 MiB.
BUFFER = 512 * 1024
# Buffers in flight between the thread that receives and writes and the one that hashes:
# enough to ride out a slow moment of either, bounded (BUFFERS x BUFFER per file).
BUFFERS = 4
_REDIRECTS = {301, 302, 303, 307, 308}
_PRIVATE = {"authorization", "cookie", "proxy-authorization"}


class BodyEnded(ConnectionError):
    """The server closed the connection before the body was complete (retried, resumed)."""


def direct(url: str) -> bool:
    """True when no proxy variable applies to ``url`` (so it is fetched here)."""
    proxies = urllib.request.getproxies()
    parts = urlsplit(url)
    if not ({parts.scheme, "all"} & set(proxies)):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


_ssl_context: Any = None
_ssl_lock = threading.Lock()


def _context() -> Any:
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            import httpx2

            _ssl_context = httpx2.create_ssl_context()
        return _ssl_context


class _Pool(threading.local):
    """One kept-alive connection per origin and thread (pull's workers each fetch many files)."""

    def __init__(self) -> None:
        self.conns: dict[tuple[str, str, int], http.client.HTTPConnection] = {}


_pool = _Pool()


def _connection(origin: tuple[str, str, int], timeout: float) -> http.client.HTTPConnection:
    conn = _pool.conns.pop(origin, None)
    if conn is not None:
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn
    scheme, host, port = origin
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)


def _raise_for_status(url: str, resp: http.client.HTTPResponse) -> None:
    """The client's own exception for an error answer (it reads status, headers and body)."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    body = resp.read(MAX_ERROR_BODY)
    response = httpx2.Response(resp.status, headers=resp.getheaders(), content=body,
                               request=httpx2.Request("GET", url))
    hf_raise_for_status(response)
    raise ConnectionError(f"unexpected answer {resp.status} for {url}")  # hf_raise_for_status raises for >= 400


@contextlib.contextmanager
def get(url: str, headers: dict[str, str], timeout: float) -> Iterator[http.client.HTTPResponse]:
    """Open a GET of ``url`` (redirects followed); yields the response, body unread.

    The connection goes back to this thread's pool when the body was read to its end, and
    is closed otherwise.
    """
    headers = dict(headers)
    for _hop in range(MAX_REDIRECTS + 1):
        origin = origin_parts(url)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn = _connection(origin, timeout)
        try:
            conn.request("GET", target or "/", headers=headers)
            resp = conn.getresponse()
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            if isinstance(exc, OSError):
                raise
            raise BodyEnded(f"{type(exc).__name__}: {exc}") from exc
        if resp.status in _REDIRECTS and resp.getheader("Location"):
            conn.close()  # a redirect's body is not worth reading to keep the connection
            new = urljoin(url, resp.getheader("Location", ""))
            if origin_parts(new) != origin:
                headers = {k: v for k, v in headers.items() if k.lower() not in _PRIVATE}
            url = new
            continue
        if resp.status >= 400:
            try:
                _raise_for_status(url, resp)
            finally:
                conn.close()
        try:
            yield resp
        except BaseException:
            conn.close()
            raise
        if resp.isclosed() and not resp.will_close:
            _pool.conns[origin] = conn
        else:
            conn.close()
        return
    raise ConnectionError(f"more than {MAX_REDIRECTS} redirects from {url}")


def pump(resp: http.client.HTTPResponse, write: Callable[[memoryview], None],
         hash_update: Callable[[memoryview], None], limit: int,
         check: Callable[[], None], *, threaded: bool) -> int:
    """Read the body into a few reused buffers: write each, hash each; returns bytes read.

    With ``threaded``, hashing runs in a second thread while this one receives and writes
    the next buffer (sha256 and the socket/disk copies then use both cores for one file).
    Every buffer written has been hashed when this returns or raises, so the bytes on disk
    and the hash agree for a resume. Reading stops one byte past ``limit``: more than the
    file's size is an error anyway, and a hostile server's endless body is not read.
    ``check`` runs before each write and may raise to stop the transfer.
    """
    buffers = [memoryview(bytearray(BUFFER)) for _ in range(BUFFERS if threaded else 1)]
    done = 0
    if not threaded:
        view = buffers[0]
        while done <= limit:
            n = _read(resp, view[: min(BUFFER, limit + 1 - done)])
            if not n:
                break
            check()
            write(view[:n])
            hash_update(view[:n])
            done += n
        return done
    free: queue.Queue[int] = queue.Queue()
    full: queue.Queue[tuple[int, int] | None] = queue.Queue()
    for i in range(len(buffers)):
        free.put(i)
    failed: list[BaseException] = []

    def hashing() -> None:
        try:
            while (item := full.get()) is not None:
                i, n = item
                hash_update(buffers[i][:n])
                free.put(i)
        except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
            failed.append(exc)
            free.put(-1)

    thread = threading.Thread(target=hashing, name="ckpt-hash", daemon=True)
    thread.start()
    try:
        while done <= limit:
            i = free.get()
            if i < 0:
                break
            n = _read(resp, buffers[i][: min(BUFFER, limit + 1 - done)])
            if not n:
                free.put(i)
                break
            check()
            write(buffers[i][:n])
            full.put((i, n))
            done += n
    finally:
        full.put(None)
        thread.join()
    if failed:
        raise failed[0]
    return done


def _read(resp: http.client.HTTPResponse, view: memoryview) -> int:
    """What one read of the socket brings (at most ``len(view)`` bytes), into ``view``.

    Not ``readinto``: that keeps reading until the buffer is full, so a server trickling a
    byte a second would hold it for as long as it likes, out of reach of the per-read
    timeout and of ``check``. A body of known length is read with the buffered reader's
    ``readinto1`` (one socket read, no copy, no allocation per read), keeping the
    response's count of bytes left as ``readinto`` would; a chunked one with ``read1``.
    """
    try:
        if resp.chunked or resp.length is None:
            data = resp.read1(len(view))
            n = len(data)
            view[:n] = data
        else:
            n = resp.fp.readinto1(view[: resp.length]) if resp.length else 0
            resp.length -= n
    except http.client.HTTPException as exc:  # IncompleteRead of a chunked body, a bad chunk size
        raise BodyEnded(f"{type(exc).__name__}: {exc}") from exc
    if not n and view and resp.length:  # the socket answers 0, not an error, to a body cut short
        raise BodyEnded(f"the connection closed {resp.length} bytes before the end of the body")
    return n
