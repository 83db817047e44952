"""The local Hub's one command line (``python -m ckpt_localhub`` = the ``local-hub`` command)
and its in-process form."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import httpx
from huggingface_hub import HfApi

from ckpt_localhub import LocalHub
from ckpt_localhub.command import local_hub
from tests.helpers.localhub_fixtures import REPO, TOKEN

ROOT = Path(__file__).resolve().parents[2]


def _module(*args: str) -> list[str]:
    return [sys.executable, "-m", "ckpt_localhub", *args]


def test_one_command_line():
    assert isinstance(local_hub, click.Command) and local_hub.name == "local-hub"
    options = {o for p in local_hub.params for o in getattr(p, "opts", [])}
    assert {"--data-dir", "--host", "--port", "--port-file", "--access-log", "--faults", "--token", "--cdn-port",
            "--lfs-direct", "--no-xet", "--cas-port"} <= options
    helped = subprocess.run(_module("--help"), capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert helped.returncode == 0 and "--lfs-direct" in helped.stdout
    assert "python -m ckpt_localhub" in helped.stdout


def test_bad_faults_file_is_a_startup_error(tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text('[{"path": "(", "status": 500}]')
    proc = subprocess.run(_module("--data-dir", str(tmp_path / "d"), "--faults", str(faults)), capture_output=True,
                          text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "bad 'path' regex" in proc.stderr


def test_cli_prints_url_first_and_stops_on_sigterm(tmp_path):
    cmd = _module("--data-dir", str(tmp_path / "d"), "--port", "0", "--port-file", str(tmp_path / "port"))
    env = dict(os.environ, LOCAL_HUB_TOKEN=TOKEN)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == f"http://127.0.0.1:{int((tmp_path / 'port').read_text())}"
        assert httpx.get(f"{first}/api/models/a/b").status_code == 404
        # The token came from LOCAL_HUB_TOKEN, not the command line.
        assert httpx.get(f"{first}/api/whoami-v2", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{first}/api/whoami-v2", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        # A second server on the same data dir is refused with a one-line error.
        other = subprocess.run(cmd[:-4], cwd=ROOT, capture_output=True, text=True, timeout=30)
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
                              capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 1 and "cannot serve on" in proc.stderr


def test_local_hub_context_manager(tmp_path, hf_client):
    with LocalHub(tmp_path / "d", token=TOKEN) as hub:
        assert hub.url == f"http://127.0.0.1:{hub.port}" and hub.cdn_url and hub.cdn_url != hub.url
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
    with LocalHub(tmp_path / "d", token=TOKEN, lfs_redirect=False) as hub:
        assert HfApi(endpoint=hub.url, token=TOKEN).repo_exists(REPO) and hub.cdn_url is None
