"""A push makes at most one commit per batch plus 20, then gives up with an
error: a Hub whose listing never shows what landed (here: the folder's listing always
empty) must not get commits without end."""

from __future__ import annotations

from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import env_for, one_line_error, seed
from tests.helpers.hostile_proxy import hostile_fixture  # noqa: F401


def test_a_push_that_never_converges_stops_at_its_commit_budget(hub_server, hf_client, hostile, cli, tmp_path):
    extra = 20  # docs/concepts/promises.md's number, held here: the code's constant may not drift from it

    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", {"old.bin": b"old"}, tmp_path / "seed", step=1)  # the folder exists
    proxy = hostile(hub)
    # The folder's listing at every head answers empty: each plan finds every file missing,
    # so no part is ever the last.
    proxy.set_rules([{"method": "GET", "path": r"/tree/[0-9a-f]{40}/checkpoint-1$", "body": "[]", "times": -1}])
    src = write_checkpoint(tmp_path / "src", {"a.bin": b"a" * 10, "b.bin": b"b" * 10, "c.bin": b"c" * 10})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
              env=env_for(proxy, tmp_path, CKPT_MAX_FILES_PER_COMMIT="2"))
    assert run.code == 1, run.stdout + run.stderr
    assert "commits" in one_line_error(run.stderr)
    # Each commit the push makes shows its upload line (the client skips sending the ones
    # that change nothing, so the Hub's own count would be lower).
    made = [line for line in run.stderr.splitlines() if line.startswith("push checkpoint-1: uploading")]
    batches = 3  # one file and the manifest a commit
    assert len(made) == batches + extra, run.stderr
