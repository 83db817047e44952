"""The local Hub's listeners: the Hub itself and, by default, a second origin standing in
for the CDN that LFS downloads are redirected to.

Example (in-process, e.g. in a test or a demo):

    >>> from huggingface_hub import HfApi
    >>> with LocalHub("hubdata") as hub:
    ...     api = HfApi(endpoint=hub.url, token="anything")
    ...     _ = api.create_repo("me/ckpts")
    ...     _ = api.upload_file(path_or_fileobj=b"hi", path_in_repo="a.txt", repo_id="me/ckpts")
    ...     api.list_repo_files("me/ckpts")
    ['.gitattributes', 'a.txt']

Example (a separate process; prints its URL as the first stdout line):

    $ python -m ckpt_localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
    http://127.0.0.1:41233
"""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from .accesslog import AccessLog
from .app import HubApp
from .context import Hub
from .faults import FaultSet
from .httpserver import MAX_CONNECTIONS, Listener
from .oidc import TrustedIssuer, TrustedPublisher
from .routes import CAS_ROUTES, CDN_ROUTES, HUB_ROUTES
from .signing import Signer
from .storage import Storage
from .xet.store import MAX_MATERIALIZE_BYTES, XetStore

CDN_URL_TTL_S = 3600  # how long a redirect's CDN URL works, about what the Hub's signed URLs give
XET_TOKEN_TTL_S = 3600  # a CAS token's life; hf_xet refreshes it through the token route
OIDC_TOKEN_TTL_S = 3600  # an exchanged token's life, about the Hub's


def _write_port_file(port_file: str | os.PathLike[str], port: int) -> None:
    target = Path(port_file)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, target)


class LocalHub:
    """The local Hub in background threads of this process.

    ``lfs_redirect`` (default): ``resolve`` answers LFS files with a redirect to a second
    listener on ``cdn_port`` (0 picks a free one), as the Hub redirects to its CDN. Off:
    the Hub listener serves LFS bytes itself.

    ``xet`` (default): a third listener on ``cas_port`` is the Xet CAS service, the token
    routes answer, and files uploaded through Xet carry their Xet hash in ``resolve`` and
    the listings. Off (``--no-xet``): plain LFS only, as before the Hub had Xet.
    ``xet_max_materialize_bytes`` bounds the bytes of files one uploaded shard may make the
    server rebuild (tests set it low).

    Example:

        >>> with LocalHub("hubdata", token="secret") as hub:  # doctest: +ELLIPSIS
        ...     print(hub.url, hub.cdn_url)
        http://127.0.0.1:... http://127.0.0.1:...
    """

    def __init__(self, data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
                 faults: str | os.PathLike[str] | None = None, token: str | None = None,
                 access_log: str | os.PathLike[str] | None = None, *, lfs_redirect: bool = True,
                 cdn_port: int = 0, cdn_url_ttl: int = CDN_URL_TTL_S, xet: bool = True, cas_port: int = 0,
                 xet_token_ttl: int = XET_TOKEN_TTL_S, max_connections: int = MAX_CONNECTIONS,
                 xet_max_materialize_bytes: int = MAX_MATERIALIZE_BYTES, oidc_issuer: str | None = None,
                 trusted_publishers: Sequence[str | TrustedPublisher] = (),
                 oidc_token_ttl: int = OIDC_TOKEN_TTL_S) -> None:
        self.data_dir = Path(data_dir)
        self.access_log = Path(access_log) if access_log else None
        fault_set = FaultSet(faults)
        store = Storage(data_dir)
        xet_store = store.xet = XetStore(store.objects, xet_max_materialize_bytes) if xet else None
        self.hub = Hub(store, token=token, signer=Signer(cdn_url_ttl), lfs_redirect=lfs_redirect,
                       xet=xet_store, xet_token_ttl=xet_token_ttl)
        if oidc_issuer is not None:
            self.hub.oidc = TrustedIssuer(oidc_issuer, tuple(
                p if isinstance(p, TrustedPublisher) else TrustedPublisher.parse(p) for p in trusted_publishers),
                token_ttl=oidc_token_ttl)
        elif trusted_publishers:
            raise ValueError("trusted publishers need the issuer they trust (--oidc-issuer)")
        self._log = AccessLog(access_log)
        self._listeners: list[Listener] = []
        try:
            self._server = Listener((host, port), HubApp(self.hub, HUB_ROUTES, "hub", fault_set, self._log),
                                    max_connections)
            self._listeners.append(self._server)
            self.cdn_url: str | None = None
            if lfs_redirect:
                cdn = Listener((host, cdn_port), HubApp(self.hub, CDN_ROUTES, "cdn", fault_set, self._log),
                               max_connections)
                self._listeners.append(cdn)
                self.cdn_url = self.hub.cdn_url = cdn.url
            self.cas_url: str | None = None
            if xet:
                cas = Listener((host, cas_port), HubApp(self.hub, CAS_ROUTES, "cas", fault_set, self._log),
                               max_connections)
                self._listeners.append(cas)
                self.cas_url = self.hub.cas_url = cas.url
        except BaseException:
            self._close()
            raise
        self.port: int = self._server.port
        self.url: str = self._server.url
        self.hub.url = self.url
        for i, listener in enumerate(self._listeners):
            listener.start(("localhub", "localhub-cdn", "localhub-cas")[i] if i < 3 else "localhub")

    def _close(self) -> None:
        # The listeners stop side by side: each waits for its accept loop to notice, so one
        # after another would add those waits up.
        stopping = [threading.Thread(target=listener.stop, name="localhub-stop") for listener in self._listeners]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        self.hub.store.close()
        self._log.close()

    def stop(self) -> None:
        self._close()

    def __enter__(self) -> LocalHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def run_server(data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
               port_file: str | os.PathLike[str] | None = None,
               access_log: str | os.PathLike[str] | None = None,
               faults: str | os.PathLike[str] | None = None, token: str | None = None, *,
               lfs_redirect: bool = True, cdn_port: int = 0, xet: bool = True, cas_port: int = 0,
               max_connections: int = MAX_CONNECTIONS, oidc_issuer: str | None = None,
               trusted_publishers: Sequence[str | TrustedPublisher] = (),
               oidc_token_ttl: int = OIDC_TOKEN_TTL_S) -> None:
    """Serve until SIGTERM/SIGINT. Prints the base URL as the first stdout line once listening.

    Listening beyond loopback without a token prints a warning first (on stderr): such a
    server lets everyone who can reach it read, write and delete every repo.

    Raises ``FaultFileError`` for an unusable faults file, ``StorageError`` for a data dir
    in use, and ``OSError`` when a port is taken.
    """
    hub = LocalHub(data_dir, host=host, port=port, faults=faults, token=token, access_log=access_log,
                   lfs_redirect=lfs_redirect, cdn_port=cdn_port, xet=xet, cas_port=cas_port,
                   max_connections=max_connections, oidc_issuer=oidc_issuer,
                   trusted_publishers=trusted_publishers, oidc_token_ttl=oidc_token_ttl)
    if token is None and not _is_loopback(host):
        print(f"local-hub: warning: listening on {host} without --token: the server is open to everyone who "
              "can reach it (they can read, write and delete every repo)", file=sys.stderr, flush=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if port_file is not None:
            _write_port_file(port_file, hub.port)
        print(hub.url, flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        hub.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
