"""latest on a repo that does not exist, or with no token: found=false, exit 0, and a warning
that says the resume job starts over and how to make that an error, in the door's words."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import ckpt_action as ckpt
from tests.conftest import clean_env
from tests.helpers.gha import parse_github_output, workflow_commands


def test_in_actions_the_warning_is_an_annotation_naming_the_require_input(hub_server, cli, tmp_path: Path) -> None:
    hub = hub_server()
    out = tmp_path / "gh-out"
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(out),
                    INPUT_MODE="latest", INPUT_REPO="o/missing", INPUT_REQUIRE="false")
    run = cli("from-action", env=env)
    assert run.code == 0, run.stderr
    assert parse_github_output(out)["found"] == "false"
    warnings = [text for kind, text in workflow_commands(run.stderr) if kind == "warning"]
    assert len(warnings) == 1, run.stderr
    assert "o/missing" in warnings[0] and "start over" in warnings[0] and "require: true" in warnings[0]
    assert "no token" in warnings[0] and "--require" not in warnings[0]


def test_on_the_command_line_it_names_require_and_with_a_token_says_it_cannot_see(hub_server, cli, tmp_path):
    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN="hf_some_token")
    run = cli("latest", "--repo", "o/missing", "--json", env=env)
    assert run.code == 0 and run.json["found"] is False, run.stderr
    assert "start over" in run.stderr and "--require" in run.stderr and "cannot see it" in run.stderr
    assert "no token" not in run.stderr and "::warning::" not in run.stderr


def test_in_python_it_names_require_true(hub_server, tmp_path: Path, caplog) -> None:
    hub = hub_server()
    with caplog.at_level(logging.WARNING, logger="ckpt_action"):
        assert ckpt.latest("o/missing", endpoint=hub.url, token="hf_some_token") is None
    assert any("start over" in r.getMessage() and "require=True" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("args", [
    ("latest", "--repo", "o/missing", "--require"),
    ("pull", "--repo", "o/missing", "--latest", "--local-dir", "resume"),
    ("promote", "--repo", "o/missing", "--best", "eval_loss:min", "--to", "release"),
], ids=["latest-require", "pull-latest", "promote-best"])
def test_where_no_checkpoint_is_an_error_a_missing_repo_is_that_one_error_line_saying_why(hub_server, cli, tmp_path,
                                                                                        args):
    hub = hub_server()
    run = cli(*args, env=clean_env(tmp_path, HF_ENDPOINT=hub.url))
    assert run.code == 3, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no complete checkpoint-N in o/missing"), run.stderr
    assert "o/missing does not exist (no token is set" in lines[0], run.stderr
    assert "start over" not in run.stderr and "--require" not in run.stderr  # no advice to pass what was passed


def test_in_python_require_true_raises_saying_why_and_warns_nothing(hub_server, caplog) -> None:
    hub = hub_server()
    with caplog.at_level(logging.WARNING, logger="ckpt_action"), \
            pytest.raises(ckpt.NoCheckpointError, match=r"o/missing does not exist \(or this token cannot see it\)"):
        ckpt.latest("o/missing", endpoint=hub.url, token="hf_some_token", require=True)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_missing_bucket_is_called_a_bucket(hub_server, cli, tmp_path):
    hub = hub_server()
    run = cli("latest", "--repo", "hf://buckets/o/missing", "--require", env=clean_env(tmp_path, HF_ENDPOINT=hub.url))
    assert run.code == 3 and "hf://buckets/o/missing does not exist (no token is set, so a private bucket looks"\
        " missing)" in run.stderr, run.stderr
