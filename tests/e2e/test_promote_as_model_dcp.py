"""promote --as-model of a DCP checkpoint saved on 4 ranks: its shards consolidated into
safetensors (one file, or shards with an index under a small --max-shard-size), names and
dtypes as saved, the bytes entry left out, in one commit with its own manifest."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="the DCP storage classes need torch (the [distributed] extra)")
from safetensors.torch import load_file  # noqa: E402

from tests.e2e.test_distributed_dcp import REPO, SCRIPT  # noqa: E402
from tests.helpers.dist_dcp_script import full  # noqa: E402
from tests.helpers.dist_helpers import results, standalone  # noqa: E402
from tests.helpers.localhub_fixtures import TOKEN, make_hub_env  # noqa: E402


@pytest.mark.timeout(400)
def test_a_dcp_checkpoint_of_four_ranks_promoted_as_a_model_is_safetensors(hub_server, hf_client, tmp_path):
    import ckpt_action as ckpt

    server = hub_server(token=TOKEN)
    out = tmp_path / "out"
    out.mkdir()
    env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
    env.update(REPO=REPO, MODE="save", OUT_DIR=str(out), CKPT_DISTRIBUTED_TIMEOUT="30")
    [(code, log)] = standalone(4, [str(SCRIPT)], env, tmp_path)
    saved = results([out], 4)
    assert code == 0 and "handle" in saved[0], log
    sha = saved[0]["handle"][2]
    expected = {"w": full(), "b": torch.ones(3), "step": torch.tensor(7)}

    def pulled(handle, name: str):
        dest = tmp_path / name
        ckpt.pull(handle, dest, endpoint=server.url, token=TOKEN)
        return dest

    one = ckpt.promote(REPO, "release", subfolder="checkpoint-7", revision=sha, as_model=True,
                       endpoint=server.url, token=TOKEN)
    dest = pulled(one, "one")
    assert sorted(p.name for p in dest.iterdir() if p.name != ".ckpt-pull.json") == [
        "ckpt-manifest.json", "model.safetensors"]
    got = load_file(dest / "model.safetensors")
    assert set(got) == set(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    manifest = json.loads((dest / "ckpt-manifest.json").read_text())
    assert manifest["source"] == {"repo": REPO, "subfolder": "checkpoint-7", "revision": sha}
    assert manifest["step"] == 7 and set(manifest["files"]) == {"model.safetensors"}

    # w is 1024 bytes: under 600 it gets a shard of its own, b and step share the next.
    sharded = ckpt.promote(REPO, "release-sharded", subfolder="checkpoint-7", revision=sha, as_model=True,
                           max_shard_size=600, endpoint=server.url, token=TOKEN)
    dest = pulled(sharded, "sharded")
    index = json.loads((dest / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert index["metadata"]["total_size"] == 64 * 4 * 4 + 3 * 4 + 8
    got = {}
    for shard in shards:
        part = load_file(dest / shard)
        assert all(index["weight_map"][k] == shard for k in part)
        got |= part
    assert set(got) == set(expected) and all(torch.equal(got[k], v) for k, v in expected.items())
