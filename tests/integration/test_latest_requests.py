"""What ``latest`` asks the Hub for: a complete folder is found and checked in three requests."""

from __future__ import annotations

from tests.conftest import write_checkpoint


def test_latest_checks_a_complete_folder_in_three_requests(hub_server, hf_client, cli, tmp_path):
    from tests.conftest import clean_env

    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2):
        src = write_checkpoint(tmp_path / f"c{step}", {"model.safetensors": bytes([step]) * 5000,
                                                      "nested/config.json": b"{}"})
        assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), env=env).code == 0
    start = len(hub.log_entries())
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0 and run.json["subfolder"] == "checkpoint-2" and run.json["verified"] is True
    paths = [e["path"] for e in hub.log_entries()[start:]]
    assert len(paths) == 3, paths
    assert paths[0].endswith("/refs") and "/tree/" in paths[1] and paths[2].endswith("/ckpt-manifest.json")
