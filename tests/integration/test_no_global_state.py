"""A library call changes nothing global: the environment, huggingface_hub's constants and
its client factory are as the user left them, and the user's client keeps doing the work."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_localhub import LocalHub
from tests.conftest import write_checkpoint
from tests.helpers.proxying import POLL_S


class _Sink(BaseHTTPRequestHandler):
    """Another Hub the user talks to directly: records each request's headers, answers 404."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_hub():
    seen: list[dict[str, str]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Sink", (_Sink,), {"seen": seen}))
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    server.seen = seen  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


def _constants() -> dict[str, object]:
    from huggingface_hub import constants

    return {k: v for k, v in vars(constants).items() if k.isupper()}


def test_an_api_call_leaves_the_process_as_it_found_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         other_hub) -> None:
    import httpx2
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    for name in [k for k in os.environ if k.startswith(("HF_", "HUGGING", "CKPT_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf_home" / "stored_tokens"))
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(tmp_path / "hf_home" / "agents.json"))
    # The user's own Hub (HF_ENDPOINT) is the other one; telemetry is on, as by default.
    monkeypatch.setattr(constants, "ENDPOINT", other_hub.url)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    # Xet as huggingface_hub defaults to it: the local Hub speaks Xet, so nothing is switched.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)

    # A user's factory (a corporate proxy, say): its clients carry a header and a timeout of
    # their own and note every request they send.
    sent: list[str] = []

    def user_factory() -> httpx2.Client:
        return httpx2.Client(headers={"x-corp": "yes"}, timeout=httpx2.Timeout(123.0), follow_redirects=True,
                             event_hooks={"request": [_http.hf_request_event_hook, lambda r: sent.append(str(r.url))]})

    huggingface_hub.set_client_factory(user_factory)
    try:
        env_before, constants_before = dict(os.environ), _constants()
        src = write_checkpoint(tmp_path / "out" / "checkpoint-3", {"w.bin": b"w" * 100, "config.json": b"{}"})
        with LocalHub(tmp_path / "hub") as hub:
            handle = ckpt.push(src, repo="o/r", step=3, endpoint=hub.url, timeout=7)
            assert ckpt.latest("o/r", endpoint=hub.url) == handle
            ours = [url for url in sent if url.startswith(hub.url)]
            assert ours, "the API's requests did not go through the user's client"

            assert dict(os.environ) == env_before
            assert _constants() == constants_before
            assert _http._GLOBAL_CLIENT_FACTORY is user_factory
            session = huggingface_hub.utils.get_session()
            assert session.timeout == httpx2.Timeout(123.0), "the user's client timeout was changed"

            # huggingface_hub on its own goes where the user configured it, as configured.
            sent.clear()
            with pytest.raises(huggingface_hub.errors.HfHubHTTPError):
                huggingface_hub.HfApi().list_repo_refs("o/r")
            assert sent and all(url.startswith(other_hub.url) for url in sent), sent
            refs = [h for h in other_hub.seen if h["path"].startswith("/api/models/o/r/refs")]
            assert refs and refs[0]["x-corp"] == "yes"
            assert not refs[0]["user-agent"].startswith("ckpt-action"), refs[0]["user-agent"]
            # ... and a user's request on a thread of its own keeps the client's timeout:
            # nothing of ours is in force once our call returned.
            from ckpt_action.stores.hub import deadline

            assert deadline._stall_now() is None
    finally:
        huggingface_hub.set_client_factory(_http.default_client_factory)


def _class_attributes() -> dict[str, object]:
    """Every attribute of every class of ckpt_action's loaded modules (copies of containers)."""
    import copy
    import inspect
    import sys

    state: dict[str, object] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("ckpt_action") or module is None:
            continue
        for cname, cls in list(vars(module).items()):
            if inspect.isclass(cls) and cls.__module__ == name:
                for key, value in vars(cls).items():
                    if not key.startswith("__"):
                        state[f"{name}.{cname}.{key}"] = (copy.copy(value) if isinstance(value, (dict, list, set))
                                                          else value)
    return state


def test_cli_commands_and_the_demo_in_process_leave_the_process_as_they_found_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants
    from huggingface_hub.utils import are_progress_bars_disabled

    from ckpt_action.cli import app, demo, options, render  # noqa: F401 - their classes are checked

    for name in [k for k in os.environ if k.startswith(("HF_", "HUGGING", "CKPT_", "GITHUB_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_TOKEN", "hf_the_environment_token")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf_home" / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.chdir(tmp_path)

    env_before, constants_before = dict(os.environ), _constants()
    bars_before, classes_before = are_progress_bars_disabled(), _class_attributes()

    def run(*argv: str) -> int:
        try:
            app.run(list(argv))
        except SystemExit as exited:
            return int(exited.code or 0)
        return 0

    assert run("demo", "--keep", str(tmp_path / "demo")) == 0
    with LocalHub(tmp_path / "hub") as hub:
        src = write_checkpoint(tmp_path / "out" / "checkpoint-5", {"w.bin": b"w" * 100, "config.json": b"{}"})
        assert run("push", "--repo", "o/r", "--local-dir", str(src), "--step", "5", "--endpoint", hub.url,
                   "--token", "hf_a_token_on_the_command_line") == 0
        assert run("latest", "--repo", "o/r", "--endpoint", hub.url, "--json") == 0
        assert run("latest", "--repo", "o/none", "--endpoint", hub.url, "--require") != 0

    assert dict(os.environ) == env_before
    assert _constants() == constants_before
    assert are_progress_bars_disabled() == bars_before, "huggingface_hub's progress bars were switched"
    after = _class_attributes()
    assert {k: v for k, v in after.items() if k in classes_before and classes_before[k] != v} == {}
