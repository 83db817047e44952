"""The W&B pointer through the CLI: push logs it offline, pull --pointer pulls that SHA."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ENTRYPOINT, RETRY_MAX_DELAY, clean_env, read_tree, write_checkpoint
from tests.helpers.wandb_records import decode_single_run

FAKE_TOKEN = "hf_FAKE_not_a_real_token_wandb_cli_0123"


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def wandb_env(tmp_path, hub, **extra):
    w = tmp_path / "wandb"
    settings = {"HF_ENDPOINT": hub.url, "WANDB_MODE": "offline", "WANDB_DIR": str(w),
                "WANDB_DATA_DIR": str(w / "data"), "WANDB_CACHE_DIR": str(w / "cache"),
                "WANDB_CONFIG_DIR": str(w / "config"), "WANDB_SILENT": "true"}
    return clean_env(tmp_path, **(settings | extra))


def test_push_logs_a_pointer_and_pull_pointer_round_trips(hub, cli, tmp_path):
    env = wandb_env(tmp_path, hub, HF_TOKEN=FAKE_TOKEN)
    files = {"model.safetensors": b"\x01" * 2_000_000, "config.json": b"{}"}
    src = write_checkpoint(tmp_path / "c", files)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "40", "--json",
              "--wandb-project", "ckpts", "--wandb-run-id", "train-run-1", env=env)
    assert run.code == 0, run.stderr
    out = run.json
    assert out["wandb_artifact"] and out["wandb_run_id"] == "train-run-1"

    rec = decode_single_run(tmp_path / "wandb")
    assert rec.run_id == "train-run-1" and rec.project == "ckpts"
    (art,) = rec.artifacts
    assert art.type == "model-pointer" and sorted(art.aliases) == ["latest", "step-40"]
    assert art.checkpoint_json == {k: out[k] for k in ("repo", "subfolder", "revision", "step", "hub_url")}
    assert len(art.entries) == 1, "one checkpoint.json, never the weights"
    for path in (tmp_path / "wandb").rglob("*"):
        if path.is_file():
            assert FAKE_TOKEN.encode() not in path.read_bytes(), path

    # A newer push moves main; the pointer still pulls exactly the SHA it names.
    write_checkpoint(src, {"model.safetensors": b"\x02" * 2_000_000})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "40", env=env).code == 0
    dest = tmp_path / "d"
    pulled = cli("pull", "--pointer", art.checkpoint_json_path, "--local-dir", str(dest), "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    assert pulled.json["revision"] == out["revision"]
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == files


def test_a_failing_wandb_leaves_the_push_reported(hub, cli, tmp_path):
    # W&B retries the refused connection until its init timeout: the tests' backoff cap, not seconds.
    env = wandb_env(tmp_path, hub, WANDB_MODE="online", WANDB_BASE_URL="http://127.0.0.1:9",
                    WANDB_API_KEY="f" * 40, WANDB_INIT_TIMEOUT=str(RETRY_MAX_DELAY))
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w"})
    gh_out = tmp_path / "gh"
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json", "--wandb-project", "p",
              env=dict(env, GITHUB_OUTPUT=str(gh_out)))
    assert run.code == 0, run.stderr
    assert len(run.json["revision"]) == 40 and "wandb_artifact" not in run.json
    assert "W&B logging failed" in run.stderr
    assert "revision<<" in gh_out.read_text()
    fatal = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--wandb-project", "p",
                "--wandb-fatal", env=env)
    assert fatal.code == 1 and fatal.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.process("which modules a fresh process imports")
def test_wandb_is_not_imported_unless_used(hub, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    probe = (  # printed by an exit handler: the process ends without tearing Python down, after them
        "import atexit, sys, runpy; sys.argv = ['entrypoint.py', 'latest', '--repo', 'o/r', '--json'];"
        "\natexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules"
        " if m == 'wandb' or m.startswith('wandb.')))))"
        f"\nrunpy.run_path({str(ENTRYPOINT)!r}, run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", "import json\n" + probe], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[0])["found"] is False
    assert json.loads(lines[-1]) == []


def test_a_promote_as_model_logs_a_pointer_naming_the_release_folder(hub, cli, tmp_path):
    env = wandb_env(tmp_path, hub, HF_TOKEN=FAKE_TOKEN)
    src = write_checkpoint(tmp_path / "c", {"model.safetensors": b"\x01" * 1000, "config.json": b"{}",
                                            "optimizer.pt": b"\x02" * 1000})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "40", env=env).code == 0
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-40", "--as-model", "--to", "release", "--json",
              "--wandb-project", "ckpts", "--wandb-run-id", "release-run", env=env)
    assert run.code == 0, run.stderr
    (art,) = decode_single_run(tmp_path / "wandb").artifacts
    assert art.checkpoint_json["subfolder"] == "release" and art.checkpoint_json["revision"] == run.json["revision"]
    dest = tmp_path / "d"
    pulled = cli("pull", "--pointer", art.checkpoint_json_path, "--local-dir", str(dest), env=env)
    assert pulled.code == 0, pulled.stderr
    assert sorted(read_tree(dest)) == ["ckpt-manifest.json", "config.json", "model.safetensors"]
