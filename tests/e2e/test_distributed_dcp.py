"""torch.distributed.checkpoint through the Hub: saved on 4 ranks, loaded on 2 (DCP reshards)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.dist_helpers import ROOT, results, standalone
from tests.helpers.localhub_fixtures import TOKEN, make_hub_env

REPO = "org/dcp"
SCRIPT = ROOT / "tests" / "helpers" / "dist_dcp_script.py"


@pytest.mark.timeout(400)
def test_a_dtensor_saved_on_four_ranks_loads_on_two_from_one_commit(hub_server, hf_client, tmp_path):
    import ckpt_action as ckpt

    server = hub_server(token=TOKEN)

    def run(mode: str, nproc: int, **extra: str) -> dict:
        out = tmp_path / f"out-{mode}"
        out.mkdir()
        env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
        env.update(REPO=REPO, MODE=mode, OUT_DIR=str(out), CKPT_DISTRIBUTED_TIMEOUT="30", **extra)
        [(code, log)] = standalone(nproc, [str(SCRIPT)], env, tmp_path)
        got = results([out], nproc)
        assert code == 0 and sorted(got) == list(range(nproc)), log
        return got

    saved = run("save", 4)
    assert len({tuple(r.get("handle", ())) for r in saved.values()}) == 1 and "handle" in saved[0], saved
    sha = saved[0]["handle"][2]
    [info] = ckpt.list_checkpoints(REPO, endpoint=server.url, token=TOKEN)
    assert (info.subfolder, info.status, info.revision) == ("checkpoint-7", "complete", sha)
    listed = {Path(f).name for f in _files(server, sha) if f.startswith("checkpoint-7/")}
    assert listed == {".metadata", "ckpt-manifest.json", *(f"__{r}_0.distcp" for r in range(4))}
    metadata = _read(server, sha, "checkpoint-7/.metadata")
    assert b"ckpt-dcp-" not in metadata  # no machine's staging path travels to the Hub
    loaded = run("load", 2, REVISION=sha)
    assert all(r.get("equal") for r in loaded.values()), loaded
    # Each rank downloaded only the shards holding its rows (and the replicated tensors).
    assert all(len(r["downloaded"]) < 4 for r in loaded.values()), loaded
    assert {f for r in loaded.values() for f in r["downloaded"]} == {f"__{r}_0.distcp" for r in range(4)}


def _files(server, sha: str) -> list[str]:
    from huggingface_hub import HfApi

    return HfApi(endpoint=server.url, token=TOKEN).list_repo_files(REPO, revision=sha)


def _read(server, sha: str, path: str) -> bytes:
    import httpx

    return httpx.get(f"{server.url}/{REPO}/resolve/{sha}/{path}", headers={"authorization": f"Bearer {TOKEN}"},
                     follow_redirects=True).content
