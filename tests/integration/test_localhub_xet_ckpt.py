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


def test_a_cas_refusal_during_a_xet_push_says_what_the_cas_refused_not_cannot_reach(hub_server, cli, tmp_path):
    """A 400 from the CAS is not the network: the one line names the storage, the route it
    refused and its status, is not retried as if the Hub were down, and holds no token."""
    token = "hf_FAKE_cas_refusal_token_Zq81"
    hub = hub_server(token=token, faults=[{"method": "POST", "path": "^/v1/shards", "status": 400, "times": -1}])
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN=token)
    src = write_checkpoint(tmp_path / "c", {"model.safetensors": os.urandom(300_000)})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "7", env=env)
    line = run.stderr.strip().splitlines()[-1]
    assert run.code == 1, run.stderr
    assert "cannot reach" not in line and "check --endpoint and the network" not in line, line
    assert "Xet storage" in line and "refused" in line and "400 Bad Request" in line and "/v1/shards" in line, line
    assert token not in run.stdout + run.stderr
    shards = [e for e in hub.log_entries() if e["listener"] == "cas" and e["path"] == "/v1/shards"]
    assert len(shards) == 1, [e["status"] for e in shards]  # a refusal is final: not pushed again and again
