"""What the CLI prints and writes, read the way GitHub Actions reads it.

Values that come from the user or the Hub (paths, folder names, messages) must never
start a workflow command, break the $GITHUB_OUTPUT file or the job summary's table, and
the token goes only to the configured endpoint and never into a message.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ckpt_action.ci.outputs import OUTPUTS, step_outputs
from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import env_for
from tests.helpers.gha import parse_github_output, unescape_data, workflow_commands
from tests.helpers.proxying import POLL_S

HOSTILE = "ck\n::add-mask::leak ##[set-output name=x]y |<img src=x>`"


@pytest.fixture
def cli(cli_in_process):
    """The CLI in this process: what these tests read is its streams and output files."""
    return cli_in_process


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


class _Sink(BaseHTTPRequestHandler):
    """Records every request's headers and answers 400 with the Authorization header echoed
    in the error body (a broken or hostile server)."""

    seen: list[dict[str, str]]

    def _answer(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps({"error": f"bad credentials {self.headers.get('Authorization')}"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Message", f"bad credentials {self.headers.get('Authorization')}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def sink():
    seen: list[dict[str, str]] = []
    handler = type("Sink", (_Sink,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    server.seen = seen  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


def test_hostile_local_dir_name_starts_no_command_and_round_trips_through_outputs(hub, cli, tmp_path):
    gh_out, summary = tmp_path / "gh-output", tmp_path / "summary.md"
    env = env_for(hub, tmp_path, GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(gh_out),
                  GITHUB_STEP_SUMMARY=str(summary))
    src = write_checkpoint(tmp_path / HOSTILE, {"w.bin": b"w" * 10})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "3", env=env)
    assert run.code == 0, run.stderr
    assert workflow_commands(run.stdout + run.stderr) == []

    # Read as the runner reads it: every output declared, the multi-line value intact.
    outputs = parse_github_output(gh_out)
    assert set(outputs) <= set(OUTPUTS)
    assert outputs["local-dir"] == str(src)
    assert outputs["subfolder"] == "checkpoint-3" and outputs["step"] == "3"

    # The summary table keeps its rows: no raw pipe, tag or backtick from the path.
    text = summary.read_text()
    assert "<img" not in text and "`" not in text.split("\n", 2)[2] and "\n::" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert all(line.count("|") == 3 for line in rows), rows


def test_error_messages_with_user_text_are_one_escaped_annotation(hub, cli, tmp_path):
    env = env_for(hub, tmp_path, GITHUB_ACTIONS="true")
    run = cli("push", "--repo", "o/r", "--local-dir", str(tmp_path / HOSTILE), "--step", "1", env=env)
    assert run.code == 2
    commands = workflow_commands(run.stdout + run.stderr)
    assert [c for c, _ in commands] == ["error"], commands
    assert "\n" not in unescape_data(commands[0][1]) and "add-mask" in commands[0][1]


def test_step_outputs_survive_every_hostile_value(tmp_path: Path) -> None:
    from ckpt_action.ci.outputs import write_github_output

    values = {"repo": "o/r", "subfolder": "a\nb", "local_dir": "x\r\ny<<EOF\nEOF\n=", "step": 1,
              "hub_url": "ghadelimiter_", "count": 2, "checkpoints": [{"subfolder": "q\n"}]}
    path = tmp_path / "out"
    write_github_output(path, values)
    parsed = parse_github_output(path)
    assert parsed == step_outputs(values)


def test_the_token_in_a_server_error_never_reaches_the_output(sink, cli, tmp_path):
    token = "hf_FAKE_echoed_back_token_ZZ93x"
    env = env_for(sink, tmp_path, HF_TOKEN=token, GITHUB_ACTIONS="true")
    run = cli("latest", "--repo", "o/r", env=env)
    assert run.code == 1
    assert sink.seen and sink.seen[0].get("authorization") == f"Bearer {token}"
    assert token not in run.stdout + run.stderr and token[8:] not in run.stdout + run.stderr
    assert "***" in run.stderr


def _pointer(tmp_path: Path, endpoint: str) -> Path:
    sha = "a" * 40
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"repo": "o/r", "subfolder": "checkpoint-5", "revision": sha, "step": 5,
                                "hub_url": f"{endpoint}/o/r/tree/{sha}/checkpoint-5"}))
    return path


def test_a_pointer_naming_another_host_gets_no_token(sink, hub, cli, tmp_path):
    token = "hf_FAKE_pointer_token_QQ71"
    pointer = _pointer(tmp_path, sink.url)
    dest = str(tmp_path / "dest")
    # No endpoint configured: the public Hub is, and the pointer names another host.
    env = env_for(hub, tmp_path, HF_TOKEN=token)
    env.pop("HF_ENDPOINT")
    run = cli("pull", "--pointer", str(pointer), "--local-dir", dest, env=env)
    assert run.code == 2, run.stderr
    assert sink.url in run.stderr and "https://huggingface.co" in run.stderr and "--endpoint" in run.stderr
    # HF_ENDPOINT names the local Hub: the pointer's host is still another one.
    run = cli("pull", "--pointer", str(pointer), "--local-dir", dest, env=env_for(hub, tmp_path, HF_TOKEN=token))
    assert run.code == 2 and hub.url in run.stderr
    assert sink.seen == []
    # Named explicitly, the host is trusted: the request goes there.
    run = cli("pull", "--pointer", str(pointer), "--local-dir", dest, "--endpoint", sink.url, env=env)
    assert run.code == 1 and sink.seen
