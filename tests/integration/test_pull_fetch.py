"""The path file bodies take (ckpt_action/stores/hub/download.py): token only to the configured origin,
bounded reads, the client library when a proxy applies."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ckpt_action.stores.hub import download
from tests.helpers.chaos_helpers import ckpt
from tests.helpers.proxying import POLL_S
from tests.helpers.pull_helpers import Puller, pulled

TOKEN = "Bearer test-token-not-real"


class _Server:
    """A loopback server answering GET from ``routes`` (path -> (status, headers, body)), logging headers."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle(self) -> None:
                try:
                    super().handle()
                except ConnectionError:  # the client hung up on purpose (a body it would not read)
                    pass

            def do_GET(self) -> None:
                outer.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = outer.routes[self.path]
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(POLL_S,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[_Server]]:
    made: list[_Server] = []
    yield made
    for server in made:
        server.close()


def test_the_token_follows_a_redirect_only_within_the_origin(servers):
    cdn = _Server({"/blob": (200, {}, b"payload")})
    hub = _Server({"/resolve": (302, {"Location": "/resolve-2"}, b""),
                   "/resolve-2": (307, {"Location": f"{cdn.url}/blob"}, b"")})
    servers += [cdn, hub]
    with download.get(f"{hub.url}/resolve", {"Authorization": TOKEN, "User-Agent": "t"}, 10) as resp:
        assert resp.read() == b"payload"
    assert [(p, h.get("authorization")) for p, h in hub.seen] == [("/resolve", TOKEN), ("/resolve-2", TOKEN)]
    assert [(p, h.get("authorization"), h.get("user-agent")) for p, h in cdn.seen] == [("/blob", None, "t")]


def test_an_endless_body_is_read_no_further_than_the_file_needs(servers):
    big = _Server({"/f": (200, {"Content-Length": str(1 << 40)}, b"x" * (3 * download.BUFFER))})
    servers.append(big)
    got = bytearray()
    with download.get(f"{big.url}/f", {}, 10) as resp:
        n = download.pump(resp, lambda v: got.extend(v), lambda v: None, 1000, lambda: None, threaded=True)
    assert n == len(got) == 1001, "one byte past the expected size is enough to know it is wrong"


def test_error_answers_become_the_client_library_errors(servers):
    from huggingface_hub.errors import HfHubHTTPError

    hub = _Server({"/gone": (503, {"Retry-After": "7"}, b'{"error": "down for a bit"}')})
    servers.append(hub)
    with pytest.raises(HfHubHTTPError) as info, download.get(f"{hub.url}/gone", {}, 10):
        pass
    assert info.value.response.status_code == 503 and info.value.response.headers["Retry-After"] == "7"


def test_a_pull_through_a_proxy_streams_through_the_client(hub_server, hf_client, cli, tmp_path):
    # LFS served by the Hub itself: the proxy stand-in below is the Hub, not its CDN.
    puller = Puller(hub_server(extra_args=("--lfs-direct",)), cli, tmp_path)
    files = ckpt(1, big=300_000)
    puller.seed("checkpoint-1", files, step=1)
    # The local Hub answers absolute-form requests too, so it can stand in for an HTTP proxy.
    env = dict(puller.env, HTTP_PROXY=puller.hub.url, http_proxy=puller.hub.url, NO_PROXY="", no_proxy="")
    start = len(puller.hub.log_entries())
    run = puller("checkpoint-1", tmp_path / "d", env=env)
    assert run.code == 0, run.stderr
    assert pulled(tmp_path / "d") == files
    proxied = [e["path"] for e in puller.hub.log_entries()[start:] if "/resolve/" in e["path"]]
    assert proxied and all(p.startswith("http://") for p in proxied), proxied
    assert run.json["verified_by"] == "manifest"


def test_proxy_variables_decide_the_path(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert download.direct("https://huggingface.co/o/r/resolve/x")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert not download.direct("https://huggingface.co/o/r/resolve/x")
    assert download.direct("http://127.0.0.1:8000/x")
    monkeypatch.setenv("NO_PROXY", "huggingface.co")
    assert download.direct("https://huggingface.co/o/r/resolve/x")


def test_a_fresh_download_never_truncates_its_file_to_zero(servers, monkeypatch, tmp_path):
    """On ext4 a truncate to size 0 marks the file so its close() writes back every dirty
    page (auto_da_alloc): 0.4 s held per 700 MB file in the resume bench. A new staging
    file is empty already; only bytes written past what was hashed are ever cut."""
    import hashlib
    import os

    from ckpt_action.checkpoint.manifest import FileDigest
    from ckpt_action.settings import Settings
    from ckpt_action.stores.hub.fetch import fetch_file

    body = os.urandom(3 * download.BUFFER + 5)
    cdn = _Server({"/o/r/resolve/abc/ck/f.bin": (200, {}, body)})
    servers.append(cdn)

    class Remote:
        repo = "o/r"
        settings = Settings(cdn.url)

        def file_url(self, sha: str, path: str) -> str:
            return f"{cdn.url}/{self.repo}/resolve/{sha}/{path}"

        def headers(self) -> dict[str, str]:
            return {}

    cuts: list[int] = []
    real = os.ftruncate
    monkeypatch.setattr(os, "ftruncate", lambda fd, n: (cuts.append(n), real(fd, n))[1])
    dest = tmp_path / "f.bin"
    want = FileDigest(len(body), hashlib.sha256(body).hexdigest())
    got = fetch_file(Remote(), "abc", "ck/f.bin", dest, want)  # type: ignore[arg-type]
    assert got.sha256 == want.sha256 and dest.read_bytes() == body
    assert cuts == [], f"a fresh file was truncated to {cuts}"
