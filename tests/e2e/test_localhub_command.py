"""The local Hub's one command line (``python -m ckpt_localhub`` = the ``local-hub`` command)
and its in-process form."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner
from huggingface_hub import HfApi

from ckpt_action.cli.app import cli
from ckpt_localhub import LocalHub
from ckpt_localhub.command import local_hub
from tests.helpers.localhub_fixtures import REPO, TOKEN

ROOT = Path(__file__).resolve().parents[2]
# The local Hub's own distribution: `python -m ckpt_localhub` run from there imports the
# checkout's copy, installed or not.
PACKAGE = ROOT / "packages" / "ckpt-localhub"


def _module(*args: str) -> list[str]:
    return [sys.executable, "-m", "ckpt_localhub", *args]


def test_one_command_line():
    assert isinstance(local_hub, click.Command) and local_hub.name == "local-hub"
    options = {o for p in local_hub.params for o in getattr(p, "opts", [])}
    assert {"--data-dir", "--host", "--port", "--port-file", "--access-log", "--faults", "--token", "--cdn-port",
            "--lfs-direct", "--no-xet", "--cas-port"} <= options
    helped = subprocess.run(_module("--help"), capture_output=True, text=True, timeout=30, cwd=PACKAGE)
    assert helped.returncode == 0 and "--lfs-direct" in helped.stdout
    assert "python -m ckpt_localhub" in helped.stdout


@pytest.mark.parametrize("args", [["demo"], ["local-hub", "--data-dir", "d"], ["local-hub", "--help"]])
def test_without_the_server_package_the_cli_says_what_to_install(monkeypatch, tmp_path, args):
    # The local Hub is a distribution of its own: hidden, as in a plain `pip install ckpt-action`.
    for name in [m for m in sys.modules if m == "ckpt_localhub" or m.startswith("ckpt_localhub.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ckpt_localhub", None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "pip install ./packages/ckpt-localhub" in line and "ckpt-action-localhub" in line, line
    assert result.stdout == "" and not (tmp_path / "d").exists()
    listed = CliRunner().invoke(cli, ["--help"])  # the other commands' help still works
    assert listed.exit_code == 0 and "local-hub" in listed.stdout and "demo" in listed.stdout


def test_bad_faults_file_is_a_startup_error(tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text('[{"path": "(", "status": 500}]')
    proc = subprocess.run(_module("--data-dir", str(tmp_path / "d"), "--faults", str(faults)), capture_output=True,
                          text=True, timeout=30, cwd=PACKAGE)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "bad 'path' regex" in proc.stderr


def test_cli_prints_url_first_and_stops_on_sigterm(tmp_path):
    cmd = _module("--data-dir", str(tmp_path / "d"), "--port", "0", "--port-file", str(tmp_path / "port"))
    env = dict(os.environ, LOCAL_HUB_TOKEN=TOKEN)
    proc = subprocess.Popen(cmd, cwd=PACKAGE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == f"http://127.0.0.1:{int((tmp_path / 'port').read_text())}"
        assert httpx.get(f"{first}/api/models/a/b").status_code == 404
        # The token came from LOCAL_HUB_TOKEN, not the command line.
        assert httpx.get(f"{first}/api/whoami-v2", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{first}/api/whoami-v2", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        # A second server on the same data dir is refused with a one-line error.
        other = subprocess.run(cmd[:-4], cwd=PACKAGE, capture_output=True, text=True, timeout=30)
        assert other.returncode == 2 and "in use by another local hub" in other.stderr
        assert len(other.stderr.strip().splitlines()) == 1
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_taken_port_is_exit_1(tmp_path):
    with LocalHub(tmp_path / "a") as hub:
        proc = subprocess.run(_module("--data-dir", str(tmp_path / "b"), "--port", str(hub.port)),
                              capture_output=True, text=True, timeout=30, cwd=PACKAGE)
    assert proc.returncode == 1 and "cannot serve on" in proc.stderr


def test_local_hub_context_manager(tmp_path, hf_client):
    with LocalHub(tmp_path / "d", token=TOKEN) as hub:
        assert hub.url == f"http://127.0.0.1:{hub.port}" and hub.cdn_url and hub.cdn_url != hub.url
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
    with LocalHub(tmp_path / "d", token=TOKEN, lfs_redirect=False) as hub:
        assert HfApi(endpoint=hub.url, token=TOKEN).repo_exists(REPO) and hub.cdn_url is None
