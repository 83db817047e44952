"""The local Hub's limits on what one client may make it hold: buffered request bodies,
concurrent connections, and who may call what (issue 18, item 19).

Memory is measured from /proc on the server process (its peak RSS, ``VmHWM``), so the
checks are bounds on bytes, never on time.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi

from ckpt_localhub.context import MAX_JSON_BODY
from tests.helpers.localhub_fixtures import TOKEN

MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _raw_request(port: int, head: bytes, body_bytes: int, chunked: bool = False) -> bytes:
    """Send ``head`` then ``body_bytes`` of body from a thread (stopping when the server hangs up);
    returns the answer's first bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)

    def send() -> None:
        block = b"{" + b" " * (MIB - 1)
        try:
            sent = 0
            while sent < body_bytes:
                if chunked:
                    sock.sendall(b"%x\r\n" % len(block) + block + b"\r\n")
                else:
                    sock.sendall(block)
                sent += len(block)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and hung up: what the test wants

    sock.sendall(head)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    finally:
        sender.join(60)
        sock.close()
    return answer


@pytest.mark.process("reads the server's own memory (VmRSS of its process)")
@pytest.mark.parametrize("chunked", [False, True])
def test_an_oversized_json_body_is_413_and_never_held(hub_process, chunked):
    server = hub_process(token=TOKEN)
    assert server.proc is not None
    pid = server.proc.pid
    httpx.get(f"{server.url}/api/models/a/b")  # warm up: the first request imports what routes need
    before = _status_kib(pid, "VmRSS")
    size = 96 * MIB
    framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % size
    # Anonymous with a declared length; with the token when chunked (the length is learnt by reading).
    auth = b"" if not chunked else f"Authorization: Bearer {TOKEN}\r\n".encode()
    head = (b"POST /api/validate-yaml HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + framing + auth + b"\r\n")
    answer = _raw_request(server.port, head, size, chunked=chunked)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert str(MAX_JSON_BODY).encode() in answer or b"bytes" in answer
    peak = _status_kib(pid, "VmHWM")
    assert peak - before < 24 * 1024, f"server grew by {(peak - before) // 1024} MiB for a {size // MIB} MiB body"
    # It still serves.
    assert httpx.get(f"{server.url}/api/models/a/b").status_code == 404


def test_json_bodies_under_the_cap_still_work_and_validate_yaml_stays_anonymous(hub_server, hf_client):
    server = hub_server(token=TOKEN)
    card = {"content": "---\nlicense: mit\n---\n" + "x" * (MAX_JSON_BODY // 2), "repoType": "model"}
    # Anonymous, as huggingface_hub's own RepoCard.validate calls it (it sends no Authorization
    # header, so the Hub must answer it so): the cap bounds it, not the token.
    assert httpx.post(f"{server.url}/api/validate-yaml", json=card).status_code == 200
    assert httpx.post(f"{server.url}/api/validate-yaml", json=card,
                      headers={"Authorization": "Bearer wrong"}).status_code == 401
    # The real client's card flow and commit path (preupload, commit) work against a token server.
    from huggingface_hub import ModelCard, constants

    api = HfApi(endpoint=server.url, token=TOKEN)
    api.create_repo("local-user/limits")
    api.upload_file(path_or_fileobj=b"---\nlicense: mit\n---\nhi\n", path_in_repo="README.md",
                    repo_id="local-user/limits")
    card = ModelCard("---\nlicense: mit\n---\n# card\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(constants, "ENDPOINT", server.url)  # RepoCard.validate reads only this
        card.validate()  # what ModelCard.push_to_hub runs first, with no token
        with pytest.raises(ValueError, match="must be"):
            ModelCard("---\nlicense: [1]\n---\n").validate()


def test_connections_past_the_cap_are_503(hub_server):
    server = hub_server(extra_args=("--max-connections", "2"))
    held = []
    try:
        for _ in range(2):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.sendall(b"GET /api/models/a/b HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 404")  # served, and kept open
            held.append(sock)
        refused = httpx.get(f"{server.url}/api/models/a/b")
        assert refused.status_code == 503 and "Retry-After" in refused.headers
        assert "connections" in refused.json()["error"]
    finally:
        for sock in held:
            sock.close()
    # Once the held connections close, new ones are served again (the server notices each close
    # when its thread reads EOF; a bounded number of tries, no timing assumed).
    statuses = []
    for _ in range(200):
        statuses.append(httpx.get(f"{server.url}/api/models/a/b").status_code)
        if statuses[-1] == 404:
            break
        threading.Event().wait(0.05)
    assert statuses[-1] == 404, statuses


def _start_module(tmp_path: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "ckpt_localhub", "--data-dir", str(tmp_path / "d"), "--port", "0",
           "--cdn-port", "0", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # listening: the warning, if any, was printed before the URL
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=20)
    return err


@pytest.mark.process("the warning is what the command line prints on its stderr")
def test_listening_beyond_loopback_without_a_token_warns(tmp_path):
    err = _start_module(tmp_path, "--host", "0.0.0.0")  # noqa: S104 - the case under test
    assert "warning" in err and "open to everyone who can reach it" in err and "--token" in err
    assert "warning" not in _start_module(tmp_path, "--host", "127.0.0.1")
    assert "warning" not in _start_module(tmp_path, "--host", "0.0.0.0", "--token", TOKEN)  # noqa: S104


def test_the_local_hub_page_states_the_limits_the_code_has():
    from ckpt_localhub.httpserver import MAX_CONNECTIONS

    # prose reflows; the figures must not
    readme = " ".join((ROOT / "docs" / "concepts" / "local-hub.md").read_text().split())
    assert f"at most {MAX_JSON_BODY // MIB} MiB of a JSON or form" in readme
    assert f"`--max-connections` ({MAX_CONNECTIONS})" in readme
    from ckpt_localhub.httpconnection import HEADER_TIMEOUT_S

    assert f"has not arrived whole {HEADER_TIMEOUT_S:g} s after its first byte" in readme
    from ckpt_localhub.xet.shard import MAX_SHARD_TERMS
    from ckpt_localhub.xet.store import MAX_MATERIALIZE_BYTES
    from ckpt_localhub.xet.xorb import MAX_CHUNK, MAX_XORB_BYTES, MAX_XORB_CHUNKS

    assert f"limits ({MAX_XORB_CHUNKS} chunks, {MAX_CHUNK // 1024} KiB a chunk, {MAX_XORB_BYTES // MIB - 1} MiB" \
        in readme
    assert f"more than {MAX_SHARD_TERMS:,} terms" in readme
    assert f"more than {MAX_MATERIALIZE_BYTES // 1024**3} GiB" in readme


@pytest.mark.process("the command line's own exit code and output, before any server starts")
@pytest.mark.parametrize("flag", ["--port", "--cdn-port", "--cas-port"])
def test_a_port_out_of_range_is_exit_2_naming_the_flag_and_creates_nothing(tmp_path, flag):
    data = tmp_path / "d"
    cmd = [sys.executable, "-m", "ckpt_localhub", "--data-dir", str(data), flag, "70000"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert flag in done.stderr and "70000" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) <= 4, done.stderr
    assert not data.exists()


def _slow_head(port: int) -> socket.socket:
    """A connection that has sent only the start of a request head (anonymous, as a slowloris)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET /api/models/a/b HTTP/1.1\r\nHo")
    return sock


def test_slow_anonymous_connections_do_not_lock_out_the_token_owner(tmp_path, hf_client):
    """Item 18: anonymous connections holding every slot of the cap with a half-sent head get 503
    for the next anonymous caller, but a request with the server's token is still served."""
    from ckpt_localhub import LocalHub

    with LocalHub(tmp_path / "d", token=TOKEN, max_connections=4) as hub:
        slow = [_slow_head(hub.port) for _ in range(4)]
        try:
            statuses = []
            for _ in range(200):  # the slow ones are accepted by the server's thread: wait until they are
                statuses.append(httpx.get(f"{hub.url}/api/models/a/b").status_code)
                if statuses[-1] == 503:
                    break
                threading.Event().wait(0.05)
            assert statuses[-1] == 503, statuses
            owner = httpx.get(f"{hub.url}/api/models/a/b", headers={"Authorization": f"Bearer {TOKEN}"})
            assert owner.status_code == 404, owner.text  # served: the repo does not exist
            wrong = httpx.get(f"{hub.url}/api/models/a/b", headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 503
        finally:
            for sock in slow:
                sock.close()


def test_a_request_head_that_trickles_in_is_cut_off(tmp_path, hf_client, monkeypatch):
    """A head sent a byte at a time is dropped once it took longer than the head timeout (the
    idle timeout restarts at every byte, so it alone never ends such a connection)."""
    from ckpt_localhub import LocalHub, httpconnection

    monkeypatch.setattr(httpconnection, "HEADER_TIMEOUT_S", 1.0)
    with LocalHub(tmp_path / "d") as hub:
        sock = _slow_head(hub.port)
        stop = threading.Event()

        def trickle() -> None:
            try:
                while not stop.wait(0.1):
                    sock.sendall(b"x")
            except OSError:
                pass  # the server hung up

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            answer = b""
            while chunk := sock.recv(65536):  # bounded by the socket's 30 s timeout
                answer += chunk
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:200]
        finally:
            stop.set()
            sender.join(30)
            sock.close()


@pytest.mark.process("reads the server's own memory (VmRSS of its process)")
def test_a_bucket_batch_is_bounded_by_bytes_while_it_is_read(hub_process):
    """A batch of valid lines, each padded to 60 KiB (10,000 of them held about 590 MiB): refused
    past MAX_BATCH_BYTES as it streams in, with only the operations' fields held until then."""
    from ckpt_localhub.api_bucket_files import MAX_BATCH_BYTES

    server = hub_process(token=TOKEN)
    assert server.proc is not None
    pid = server.proc.pid
    HfApi(endpoint=server.url, token=TOKEN).create_bucket("local-user/bounded")
    before = _status_kib(pid, "VmRSS")
    line = json.dumps({"type": "deleteFile", "path": "gone.bin", "pad": "x" * (60 * 1024)}).encode() + b"\n"
    size = 128 * MIB
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    head = (b"POST /api/buckets/local-user/bounded/batch HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())

    def send() -> None:
        try:
            sent = 0
            while sent < size:
                sock.sendall(b"%x\r\n" % len(line) + line + b"\r\n")
                sent += len(line)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and hung up

    sock.sendall(head)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answer = b""
    try:
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    finally:
        sock.close()
        sender.join(60)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert str(MAX_BATCH_BYTES).encode() in answer
    peak = _status_kib(pid, "VmHWM")
    assert peak - before < 48 * 1024, f"server grew by {(peak - before) // 1024} MiB for a {size // MIB} MiB batch"
    assert httpx.get(f"{server.url}/api/buckets/local-user/bounded",
                     headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
