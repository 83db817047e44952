"""With ``--json`` every exit that is not 0 prints one JSON object on stdout: ``error`` (the
message of the stderr line, which stays as it was), ``exit_code`` (the process's) and
``option`` (the option the error names, as typed, or null). A script that parses stdout gets
an object, not an empty string, whatever went wrong: a usage error Click finds before any
command's options exist, bad input, a repo or folder that is not there, a file that fails
verification, a Hub that cannot be reached, ``latest --require`` finding nothing (its one
object carries the outputs too), a watched command that fails. Without ``--json``, and in the
action (which writes step outputs instead), stdout stays as it was."""

from __future__ import annotations

import json
import socket
import sys

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import one_line_error
from tests.integration.test_bad_input import CASES, _layout

pytestmark = pytest.mark.usefixtures("hf_client")


def error_json(run) -> dict:
    """The one JSON object an error run printed, checked against its exit code and stderr line."""
    assert run.code != 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 1, f"stdout is not one line:\n{run.stdout}\n{run.stderr}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict), obj
    assert {"error", "exit_code", "option"} <= obj.keys(), obj
    assert obj["exit_code"] == run.code, (obj, run.code)
    line = one_line_error(run.stderr)  # the message on stderr as without --json
    assert obj["error"] == line.removeprefix("error: "), (obj, line)
    assert obj["option"] is None or obj["option"] in obj["error"], obj
    return obj


def with_json(args: list[str]) -> list[str]:
    """``args`` with --json among the options (before a watched command's ``--``)."""
    at = args.index("--") if "--" in args else len(args)
    return [*args[:at], "--json", *args[at:]]


@pytest.mark.parametrize(("args", "extra"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_every_bad_input_is_one_json_object(args, extra, cli_in_process, tmp_path, monkeypatch):
    """The bad-input table (tests/integration/test_bad_input.py), each row with --json."""
    paths = _layout(tmp_path)
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", **extra)
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in with_json(args)]

    def refuse(sock, address):
        raise ConnectionRefusedError("bad input must not reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    run = cli_in_process(*argv, env=env)
    assert run.code == 2, run.stderr
    error_json(run)


@pytest.mark.parametrize(("args", "option"), [
    (["push", "--local-dir", "d", "--step", "1"], "--repo"),  # missing
    (["latest", "--repo", "o/r", "--bogus"], "--bogus"),  # no such option
    (["push", "--repo", "o/r", "--local-dir", "d", "--step", "many"], "--step"),  # not a whole number
    (["latest", "--repo", "o/r", "--timeout"], "--timeout"),  # no value
    (["demo"], "--json"),  # a command without --json: the error is about it, and still an object
    (["latest", "--repo", "org/ru n"], "--repo"),  # the client's own check
    (["push", "--repo", "o/r", "--local-dir", "d"], None),  # neither --step nor --subfolder: names both
], ids=["missing", "unknown", "not-int", "no-value", "no-json-option", "bad-repo", "needs-one-of"])
def test_usage_errors_are_one_json_object_naming_the_option(args, option, cli_in_process, tmp_path):
    write_checkpoint(tmp_path / "d", {"w.bin": b"w"})
    run = cli_in_process(*with_json(args), env=clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9"))
    assert run.code == 2, run.stderr
    obj = error_json(run)
    assert obj["option"] == option, obj


def test_not_found_is_one_json_object(hub_server, cli_in_process, tmp_path):
    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w"})
    assert cli_in_process("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env).code == 0
    run = cli_in_process("pull", "--repo", "o/r", "--subfolder", "checkpoint-9", "--local-dir",
                         str(tmp_path / "d"), "--json", env=env)
    assert run.code == 1
    obj = error_json(run)
    assert "checkpoint-9" in obj["error"], obj
    run = cli_in_process("pull", "--repo", "o/nothing", "--latest", "--local-dir", str(tmp_path / "e"), "--json",
                         env=env)
    assert run.code in (1, 3)
    error_json(run)


def test_a_verification_failure_is_one_json_object(hub_server, cli_in_process, tmp_path):
    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, CKPT_RETRIES="1")
    src = write_checkpoint(tmp_path / "c", {"config.json": b'{"model_type": "tiny"}'})
    assert cli_in_process("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env).code == 0
    hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/config\.json$", "corrupt": True, "times": -1}])
    run = cli_in_process("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir",
                         str(tmp_path / "d"), "--json", env=env)
    assert run.code == 1
    obj = error_json(run)
    assert "config.json" in obj["error"], obj
    assert not (tmp_path / "d").exists()


def test_an_unreachable_hub_is_one_json_object(cli_in_process, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", CKPT_RETRIES="0", HF_TOKEN="hf_SeCrEt12tokenvalue")
    run = cli_in_process("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 1
    obj = error_json(run)
    assert obj["option"] is None and "SeCrEt12" not in run.stdout


def test_latest_require_is_one_object_with_its_outputs(hub_server, cli_in_process, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub_server().url)
    run = cli_in_process("latest", "--repo", "o/none", "--require", "--json", env=env)
    assert run.code == 3
    obj = error_json(run)
    assert obj["found"] is False and obj["exit_code"] == 3, obj
    assert obj["error"].startswith("no complete checkpoint"), obj
    # Without --require the same outputs are the object, exit 0.
    run = cli_in_process("latest", "--repo", "o/none", "--json", env=env)
    assert run.code == 0 and run.stderr.count("error") == 0
    assert json.loads(run.stdout) == {k: v for k, v in obj.items() if k not in ("error", "exit_code", "option")}


@pytest.mark.process("watch runs the training command as its child")
def test_a_watched_command_that_fails_is_one_object_with_the_report(hub_server, cli_in_process, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub_server().url)
    run = cli_in_process("watch", "--repo", "o/r", "--local-dir", str(tmp_path / "out"), "--json", "--",
                         sys.executable, "-c", "raise SystemExit(7)", env=env)
    assert run.code == 7
    obj = error_json(run)
    assert obj["command_status"] == 7 and obj["pushed"] == [] and "status 7" in obj["error"], obj


def test_without_json_stdout_stays_empty(cli_in_process, tmp_path):
    run = cli_in_process("latest", "--repo", "org/ru n", env=clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9"))
    assert run.code == 2 and run.stdout == ""
    # --json after `--` is the watched command's, not ours.
    run = cli_in_process("watch", "--repo", "run", "--local-dir", str(tmp_path / "o"), "--", "train", "--json",
                         env=clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9"))
    assert run.code == 2 and run.stdout == "", run.stdout


def test_the_action_writes_no_json_and_no_outputs_on_an_error(cli_in_process, tmp_path):
    out = tmp_path / "github-output"
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", GITHUB_WORKSPACE=str(tmp_path),
                    GITHUB_OUTPUT=str(out), INPUT_MODE="latest", INPUT_REPO="org/ru n")
    run = cli_in_process("from-action", env=env)
    assert run.code == 2
    assert run.stdout == "" and (not out.exists() or out.read_text() == "")
    assert one_line_error(run.stderr).startswith("error: input 'repo'")
