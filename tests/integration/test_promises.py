"""Promises that a one-line change in the code could break without any other test noticing.

Each test here was written against a deliberate mutation (named in its docstring) and
goes red when that mutation is applied.
"""

from __future__ import annotations

import pytest

from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import ckpt, env_for, one_line_error, seed


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def test_latest_fast_path_still_refuses_a_manifest_marked_incomplete(hub, cli, tmp_path):
    """Mutation: discover's fast path (tree id equal to the manifest's) returns "complete"
    without reading ``complete``. Here every file is present, so only that flag tells."""
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    seed(hub.url, "o/r", "checkpoint-2", ckpt(2), tmp_path, step=2, complete=False)
    run = cli("latest", "--repo", "o/r", "--json", env=env_for(hub, tmp_path))
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-1"
    assert "skipped checkpoint-2" in run.stderr and "not finished" in run.stderr
    # It took the fast path: the folder was not listed file by file.
    assert not any("/tree/" in e["path"] and "checkpoint-2" in e["path"] for e in hub.log_entries())


def test_a_corrupted_small_file_of_a_folder_without_manifest_is_refused(hub, cli, tmp_path):
    """Mutation: pull skips the git blob id check for regular files when there is no
    manifest (only the size would be left to check)."""
    from huggingface_hub import HfApi

    src = write_checkpoint(tmp_path / "trainer-out", {"config.json": b'{"hidden": 64}', "w.bin": b"w" * 100})
    api = HfApi(endpoint=hub.url)
    api.create_repo("o/r")
    api.upload_folder(repo_id="o/r", folder_path=str(src), path_in_repo="checkpoint-3")
    hub.set_faults([{"method": "GET", "path": r"/resolve/[0-9a-f]{40}/checkpoint-3/config\.json$",
                     "corrupt": True, "times": -1}])
    dest = tmp_path / "dest"
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-3", "--local-dir", str(dest),
              env=env_for(hub, tmp_path))
    assert run.code == 1, run.stderr
    assert "config.json" in one_line_error(run.stderr)
    assert not dest.exists()
