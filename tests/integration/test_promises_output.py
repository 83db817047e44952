"""Promises about what the CLI writes, each held by a test that goes red when it breaks:
dotenv values are escaped, the job summary makes no link from a value, and annotations
percent-encode "%" (the runner decodes %0A into a line break)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import env_for
from tests.helpers.gha import unescape_data, workflow_commands


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def test_a_hostile_dir_name_adds_no_dotenv_line(hub, cli, tmp_path):
    src = write_checkpoint(tmp_path / "x\nCKPT_REVISION=evil", {"w.bin": b"w"})
    out = tmp_path / "out.env"
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--dotenv", str(out),
              env=env_for(hub, tmp_path))
    assert run.code == 0, run.stderr
    lines = out.read_text().splitlines()
    revisions = [line for line in lines if line.startswith("CKPT_REVISION=")]
    assert len(revisions) == 1 and re.fullmatch(r"CKPT_REVISION=[0-9a-f]{40}", revisions[0]), lines
    assert all(re.match(r"CKPT_[A-Z_]+=", line) for line in lines), lines


def test_the_job_summary_makes_no_link_from_a_value(hub, cli, tmp_path):
    summary = tmp_path / "summary.md"
    src = write_checkpoint(tmp_path / "[click](https:evil.example)" / "ck", {"w.bin": b"w"})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1",
              env=env_for(hub, tmp_path, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary)))
    assert run.code == 0, run.stderr
    text = summary.read_text()
    assert "click" in text, text
    assert "[click]" not in text and "](" not in text.replace("](<", ""), text
    assert "evil.example)" not in text, text


def test_an_annotation_percent_encodes_percent(hub, cli, tmp_path):
    # A value holding %0A: were "%" not encoded, the runner would decode it into a new line.
    run = cli("push", "--repo", "o/r", "--local-dir", str(tmp_path / "a%0A::warning::owned"), "--step", "1",
              env=env_for(hub, tmp_path, GITHUB_ACTIONS="true"))
    assert run.code == 2
    commands = workflow_commands(run.stdout + run.stderr)
    assert [c for c, _ in commands] == ["error"], commands
    message = unescape_data(commands[0][1])
    assert "\n" not in message and "a%0A" in message, message
