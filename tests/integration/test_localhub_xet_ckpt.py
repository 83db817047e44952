"""ckpt-action itself on the Xet path: push through hf_xet, pull through the bridge."""

from __future__ import annotations

import os

from tests.conftest import clean_env, read_tree, write_checkpoint


def test_push_goes_through_xet_and_pull_follows_the_redirect_to_the_bridge(hub_server, cli, tmp_path):
    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    files = {"model.safetensors": os.urandom(3_000_000), "config.json": b'{"step": 7}'}
    src = write_checkpoint(tmp_path / "c", files)
    pushed = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "7", "--json", env=env)
    assert pushed.code == 0, pushed.stderr
    log = hub.log_entries()
    assert any(e["listener"] == "cas" and e["path"].startswith("/v1/xorbs/") for e in log)
    assert any(e["listener"] == "cas" and e["path"] == "/v1/shards" and e["status"] == 200 for e in log)
    assert not any(e["path"].endswith("/info/lfs/objects/batch") for e in log)
    start = len(log)
    dest = tmp_path / "pulled"
    pulled = cli("pull", "--repo", "o/r", "--subfolder", pushed.json["subfolder"], "--local-dir", str(dest), env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == files
    pull_log = hub.log_entries()[start:]
    assert any(e["listener"] == "hub" and e["status"] == 302 and "/resolve/" in e["path"] for e in pull_log)
    bridged = [e for e in pull_log if e["listener"] == "cdn" and "model.safetensors" in e["path"]]
    assert bridged and sum(e["bytes_out"] for e in bridged) == len(files["model.safetensors"])
