"""Partial pulls: --include / --exclude pick files of a checkpoint, verified like a full pull."""

from __future__ import annotations

import pytest

from tests.helpers.chaos_helpers import ckpt, listing, one_line_error
from tests.helpers.pull_helpers import Puller, pulled, record

BIG = 300_000


@pytest.fixture
def puller(hub_server, hf_client, cli, tmp_path):
    return Puller(hub_server(), cli, tmp_path)


def _checkpoint() -> dict[str, bytes]:
    return ckpt(1, big=BIG) | {"optimizer.pt": b"o" * 500_000, "extra/tokenizer.json": b'{"t": 1}'}


def test_weights_only_transfers_the_weights_only(puller, tmp_path):
    files = _checkpoint()
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "eval"
    run = puller("checkpoint-1", dest, "--include", "*.safetensors")
    assert run.code == 0, run.stderr
    assert run.gets == {"checkpoint-1/model.safetensors": BIG}, run.gets
    out = run.json
    assert (out["files"], out["bytes"], out["partial"], out["verified_by"]) == (1, BIG, True, "manifest")
    assert pulled(dest) == {"model.safetensors": files["model.safetensors"]}
    assert not (dest / "ckpt-manifest.json").exists(), "the manifest is a file like any other: not selected"
    assert record(dest)["partial"] is True and record(dest)["include"] == ["*.safetensors"]


def test_exclude_and_repeated_patterns(puller, tmp_path):
    files = _checkpoint()
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "d"
    run = puller("checkpoint-1", dest, "--exclude", "optimizer.pt", "--exclude", "extra/")
    assert run.code == 0, run.stderr
    want = {k: v for k, v in files.items() if k not in ("optimizer.pt", "extra/tokenizer.json")}
    assert pulled(dest) == want and (dest / "ckpt-manifest.json").exists()
    assert run.json["partial"] is True and run.json["files"] == len(want)
    both = puller("checkpoint-1", tmp_path / "d2", "--include", "*.json", "--include", "*.pt", "--exclude", "extra/*")
    assert both.code == 0, both.stderr
    assert set(pulled(tmp_path / "d2")) == {"config.json", "nested/trainer_state.json", "optimizer.pt"}


def test_a_selected_file_is_verified_like_in_a_full_pull(puller, tmp_path):
    puller.seed("checkpoint-1", _checkpoint(), step=1)
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/model\.safetensors$", "corrupt": True,
                            "times": -1}])
    dest = tmp_path / "d"
    run = puller("checkpoint-1", dest, "--include", "model.safetensors")
    assert run.code == 1 and "does not match" in one_line_error(run.stderr)
    assert not dest.exists()


def test_patterns_that_select_nothing_are_refused(puller, tmp_path):
    puller.seed("checkpoint-1", _checkpoint(), step=1)
    before = listing(tmp_path)
    run = puller("checkpoint-1", tmp_path / "d", "--include", "*.gguf")
    assert run.code == 2 and "select none" in one_line_error(run.stderr)
    assert run.gets == {} and listing(tmp_path) == before


@pytest.mark.parametrize("pattern", ["", "  ", "a\nb"], ids=["empty", "blank", "newline"])
def test_unusable_patterns_exit_2_before_any_request(pattern, puller, tmp_path):
    start = len(puller.hub.log_entries())
    run = puller("checkpoint-1", tmp_path / "d", "--exclude", pattern)
    assert run.code == 2 and "not a usable pattern" in one_line_error(run.stderr)
    assert len(puller.hub.log_entries()) == start and not (tmp_path / "d").exists()


def test_full_over_partial_fetches_the_rest_and_partial_over_full_trims(puller, tmp_path):
    files = _checkpoint()
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "d"
    assert puller("checkpoint-1", dest, "--include", "*.safetensors").code == 0
    full = puller("checkpoint-1", dest)
    assert full.code == 0, full.stderr
    assert "checkpoint-1/model.safetensors" not in full.gets and len(full.gets) == len(files) - 1
    assert pulled(dest) == files and full.json["partial"] is False and record(dest)["partial"] is False
    trim = puller("checkpoint-1", dest, "--include", "*.safetensors")
    assert trim.code == 0 and trim.gets == {}
    assert pulled(dest) == {"model.safetensors": files["model.safetensors"]}
    assert trim.json["removed_files"] == len(files)  # every other file and the manifest


def test_pull_latest_with_patterns_picks_the_same_checkpoint_as_without(puller, tmp_path):
    puller.seed("checkpoint-1", _checkpoint(), step=1)
    newest = puller.seed("checkpoint-2", ckpt(2, big=BIG), step=2)
    run = puller.cli("pull", "--repo", "o/r", "--latest", "--include", "*.safetensors", "--local-dir",
                     str(tmp_path / "d"), "--json", env=puller.env)
    assert run.code == 0, run.stderr
    assert (run.json["subfolder"], run.json["revision"], run.json["partial"]) == ("checkpoint-2", newest, True)
    latest = puller.cli("latest", "--repo", "o/r", "--json", env=puller.env)
    assert latest.json["subfolder"] == "checkpoint-2" and latest.json["revision"] == newest
