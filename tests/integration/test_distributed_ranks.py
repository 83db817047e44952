"""push(distributed=True) with ranks as threads of this process, over one in-memory store,
against an in-process local Hub: the agreement before any upload, the window between the
gather and the commit, and a commit that fails for good. Quick: no torchrun.

The process group is the only thing faked (``torchgroup.session``, the one place a push
finds its ranks): everything from ``ckpt.push`` down is the real path.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the store is torch.distributed's (the [distributed] extra)")

import ckpt_action as ckpt  # noqa: E402
from ckpt_action.client import Client  # noqa: E402
from ckpt_action.errors import DistributedError  # noqa: E402
from ckpt_action.ops import torchgroup  # noqa: E402
from ckpt_action.ops.coordination import Session  # noqa: E402
from ckpt_localhub.server import LocalHub  # noqa: E402
from tests.conftest import write_checkpoint  # noqa: E402
from tests.helpers.localhub_fixtures import entries  # noqa: E402

REPO = "org/ranks"


def _on_ranks(monkeypatch: pytest.MonkeyPatch, world: int, body: Callable[[int], Any],
              timeout: float = 20.0) -> list[Any]:
    """``body(rank)`` on ``world`` threads, each a rank of one job; each one's result or exception."""
    store = torch.distributed.HashStore()
    me = threading.local()

    def session(group: Any, _timeout: float, what: str) -> Session:
        return Session(store, me.rank, world, name="ckpt-action/world", timeout=timeout, what=what)

    monkeypatch.setattr(torchgroup, "session", session)
    out: list[Any] = [None] * world

    def one(rank: int) -> None:
        me.rank = rank
        try:
            out[rank] = body(rank)
        except Exception as exc:  # the test compares what each rank raised
            out[rank] = exc

    threads = [threading.Thread(target=one, args=(r,), name=f"rank {r}") for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return out


def _dirs(root: Path, world: int) -> list[Path]:
    return [write_checkpoint(root / f"rank-{r}", {f"model-{r:05d}.bin": os.urandom(3000 + r),
                                                 "config.json": b"{}\n"}) for r in range(world)]


def _pushes(hub: Any) -> list[Any]:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    if not api.repo_exists(REPO):
        return []
    return [c for c in api.list_repo_commits(REPO) if c.title.startswith("Push")]


def _same_error(got: list[Any]) -> DistributedError:
    assert all(isinstance(e, DistributedError) for e in got), got
    assert len({(str(e), e.exit_code) for e in got}) == 1, got
    return got[0]


def test_ranks_pushing_different_steps_upload_nothing_commit_nothing_and_name_the_rank(local_hub, tmp_path,
                                                                                       monkeypatch):
    dirs = _dirs(tmp_path, 2)
    got = _on_ranks(monkeypatch, 2, lambda r: ckpt.push(dirs[r], REPO, step=7 + r, distributed=True,
                                                        endpoint=local_hub.url))
    assert all(isinstance(e, DistributedError) and e.exit_code == 1 for e in got), got
    for rank, error in enumerate(got):  # each names its own folder first, then the one cause
        assert f"push checkpoint-{7 + rank} failed, nothing was committed: rank 1 disagrees with rank 0 about" \
               " step=: '8' vs '7'" in str(error)
        assert "rank 1 disagrees with rank 0 about --step: '8' vs '7'" in error.render("cli")
    assert _pushes(local_hub) == []
    assert entries(local_hub, "POST", contains="/preupload/") == []  # before anything was uploaded
    assert ckpt.latest(REPO, endpoint=local_hub.url) is None


@pytest.mark.parametrize("world", ["2", "4"])
def test_a_rank_of_a_job_that_joined_no_process_group_is_refused_not_pushed_alone(local_hub, tmp_path,
                                                                                  monkeypatch, world):
    """torchrun says the job has several processes, but this one is in no process group: each
    rank pushing alone would publish its own files as the whole checkpoint."""
    assert not torch.distributed.is_initialized()
    monkeypatch.setenv("WORLD_SIZE", world)
    src = write_checkpoint(tmp_path / "checkpoint-7", {"model-00001.bin": b"rank 0's shard"})
    with pytest.raises(ckpt.InputError) as exc:
        ckpt.push(src, REPO, step=7, distributed=True, endpoint=local_hub.url)
    assert "distributed=" in str(exc.value) and "init_process_group" in str(exc.value)
    assert f"a job of {world} processes" in str(exc.value)
    assert _pushes(local_hub) == [] and entries(local_hub, "POST") == []
    monkeypatch.setenv("WORLD_SIZE", "1")  # a job of one pushes alone, as without torchrun
    assert ckpt.push(src, REPO, step=7, distributed=True, endpoint=local_hub.url).subfolder == "checkpoint-7"


def test_ranks_pushing_to_different_repos_name_the_repo(local_hub, tmp_path, monkeypatch):
    dirs = _dirs(tmp_path, 3)
    got = _on_ranks(monkeypatch, 3, lambda r: ckpt.push(dirs[r], REPO if r < 2 else REPO + "-other", step=5,
                                                        distributed=True, endpoint=local_hub.url))
    assert "rank 2 disagrees with rank 0 about --repo: 'org/ranks-other' vs 'org/ranks'" in \
        _same_error(got).render("cli")
    assert _pushes(local_hub) == []


def test_agreeing_ranks_make_one_commit_of_every_ranks_files(local_hub, tmp_path, monkeypatch):
    dirs = _dirs(tmp_path, 3)
    got = _on_ranks(monkeypatch, 3, lambda r: ckpt.push(dirs[r], REPO, step=5, distributed=True,
                                                        endpoint=local_hub.url))
    assert all(isinstance(h, ckpt.CheckpointHandle) for h in got), got
    assert len(set(got)) == 1
    assert len(_pushes(local_hub)) == 1
    pulled = ckpt.pull(got[0], tmp_path / "pulled", endpoint=local_hub.url)
    assert sorted(p.name for p in pulled.glob("model-*")) == [f"model-{r:05d}.bin" for r in range(3)]
    for r in range(3):
        assert (pulled / f"model-{r:05d}.bin").read_bytes() == (dirs[r] / f"model-{r:05d}.bin").read_bytes()


def test_a_failure_a_rank_records_after_the_gather_means_no_commit(local_hub, tmp_path, monkeypatch):
    # Rank 1's upload is gathered by rank 0; then, while it waits for the result, rank 1 fails
    # (an interrupt, say): rank 0 reaches its claim only after that failure is recorded, and
    # must not commit.
    dirs = _dirs(tmp_path, 2)
    claim, fetch = Session.claim_commit, Session.fetch

    def late_claim(self: Session) -> None:
        key = self._key("decision")
        deadline = time.monotonic() + 60
        while not self.store.check([key]) and time.monotonic() < deadline:
            time.sleep(0.02)
        claim(self)

    def failing_fetch(self: Session, phase: str, sender: int, **kwargs: Any) -> Any:
        if phase == "result" and self.rank == 1:
            # Once rank 0 has read every upload (it then drops them from the store).
            mine, deadline = self._key("upload", 1), time.monotonic() + 60
            while self.store.check([mine]) and time.monotonic() < deadline:
                time.sleep(0.02)
            raise RuntimeError("interrupted while waiting for the commit")
        return fetch(self, phase, sender, **kwargs)

    monkeypatch.setattr(Session, "claim_commit", late_claim)
    monkeypatch.setattr(Session, "fetch", failing_fetch)
    got = _on_ranks(monkeypatch, 2, lambda r: ckpt.push(dirs[r], REPO, step=5, distributed=True,
                                                        endpoint=local_hub.url))
    assert isinstance(got[1], RuntimeError), got
    assert isinstance(got[0], DistributedError), got
    assert ("nothing was committed: rank 1: RuntimeError: interrupted while waiting for the commit"
            in str(got[0])), got
    assert len(entries(local_hub, "POST", contains="/preupload/")) == 2  # it was in the window: both uploaded
    assert _pushes(local_hub) == []
    assert ckpt.latest(REPO, endpoint=local_hub.url) is None


@pytest.mark.parametrize("status", [403, 500])
def test_a_commit_that_fails_for_good_is_every_ranks_one_error(hf_client, tmp_path, monkeypatch, status):
    monkeypatch.setenv("CKPT_RETRIES", "1")
    monkeypatch.setenv("CKPT_RETRY_DELAY", "0.05")
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps([{"method": "POST", "path": r"/commit/", "status": status, "times": -1}]))
    dirs = _dirs(tmp_path, 3)
    with LocalHub(tmp_path / "hub_data", faults=faults, access_log=tmp_path / "access.log") as hub:
        got = _on_ranks(monkeypatch, 3, lambda r: ckpt.push(dirs[r], REPO, step=5, distributed=True,
                                                            endpoint=hub.url))
        error = _same_error(got)
        assert "push checkpoint-5 failed on rank 0: committing:" in str(error), error
        assert str(status) in str(error)
        assert entries(hub, "POST", contains="/commit/")  # the commit was tried
        assert _pushes(hub) == []


def test_a_torn_folder_without_a_manifest_beside_ckpt_actions_checkpoints_is_never_taken(local_hub, tmp_path):
    # What ranks that disagreed used to leave: checkpoint-8/ holding one rank's shard, no manifest.
    from huggingface_hub import HfApi

    torn = "it has no manifest, and other checkpoint-N folders of this repo have one: taken as a push cut short"
    seven = ckpt.push(write_checkpoint(tmp_path / "seven", {"model.bin": b"7" * 100}), REPO, step=7,
                      endpoint=local_hub.url)
    api = HfApi(endpoint=local_hub.url)
    api.upload_file(path_or_fileobj=b"8" * 50, path_in_repo="checkpoint-8/model-00001.bin", repo_id=REPO)
    found = Client(local_hub.url).latest(REPO)
    assert found.handle is not None and found.handle.subfolder == "checkpoint-7"
    [(name, why)] = found.skipped
    assert name == "checkpoint-8" and why.startswith(torn)
    pulled = ckpt.pull(REPO, tmp_path / "pulled", endpoint=local_hub.url)  # the latest
    assert (pulled / "model.bin").read_bytes() == b"7" * 100
    rows = {i.subfolder: i for i in ckpt.list_checkpoints(REPO, endpoint=local_hub.url)}
    assert (rows["checkpoint-8"].status, rows["checkpoint-8"].complete) == ("foreign", False)
    assert rows["checkpoint-8"].problem == why
    assert seven.subfolder == "checkpoint-7"


def test_in_a_repo_only_another_tool_wrote_a_folder_without_a_manifest_is_still_taken(local_hub, tmp_path):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=local_hub.url)
    api.create_repo(REPO)
    for step in (3, 4):
        api.upload_file(path_or_fileobj=b"t" * step, path_in_repo=f"checkpoint-{step}/model.bin", repo_id=REPO)
    found = Client(local_hub.url).latest(REPO)
    assert found.handle is not None and found.handle.subfolder == "checkpoint-4" and not found.has_manifest
    assert all(i.complete for i in ckpt.list_checkpoints(REPO, endpoint=local_hub.url))


def test_a_rank_that_reports_another_step_at_finalize_means_no_commit_naming_it(local_hub, tmp_path, monkeypatch):
    # The ranks agreed on step 5; then rank 1's report of what it uploaded says step 9 (a
    # rank that wrote another checkpoint than the one agreed): the one finalize refuses it.
    dirs = _dirs(tmp_path, 2)
    gather = Session.gather

    def lying_gather(self: Session, phase: str, value: object, **kwargs: Any) -> Any:
        if phase == "upload" and self.rank == 1:
            assert isinstance(value, dict)
            value = {**value, "identity": {**value.get("identity", {}), "step": 9}}
        return gather(self, phase, value, **kwargs)

    monkeypatch.setattr(Session, "gather", lying_gather)
    got = _on_ranks(monkeypatch, 2, lambda r: ckpt.push(dirs[r], REPO, step=5, distributed=True,
                                                        endpoint=local_hub.url))
    error = _same_error(got)
    assert "rank 1 wrote step 9, not 5" in str(error), error
    assert _pushes(local_hub) == []
    assert ckpt.latest(REPO, endpoint=local_hub.url) is None


def test_ranks_pushing_to_a_bucket_write_one_manifest_last_after_every_rank(hub_server, xet_client, tmp_path,
                                                                              monkeypatch):
    """Each rank uploads its own files into the bucket; rank 0 writes the manifest once, alone,
    after the one finalize found every rank's file listed with the Xet hash that rank uploaded."""
    from huggingface_hub import HfApi

    from tests.helpers.localhub_fixtures import TOKEN

    hub = hub_server(token=TOKEN)
    uri = "hf://buckets/local-user/ckpts/run-1"
    dirs = _dirs(tmp_path, 3)
    got = _on_ranks(monkeypatch, 3, lambda r: ckpt.push(dirs[r], uri, step=5, distributed=True, endpoint=hub.url,
                                                        token=TOKEN))
    assert all(isinstance(h, ckpt.CheckpointHandle) for h in got), got
    assert len(set(got)) == 1 and got[0].revision.startswith("sha256:")
    batches = entries(hub, "POST", "/api/buckets/local-user/ckpts/batch")
    assert len(batches) == 4  # one per rank's files, then the manifest alone
    pulled = ckpt.pull(got[0], tmp_path / "pulled", endpoint=hub.url, token=TOKEN)
    for r in range(3):
        assert (pulled / f"model-{r:05d}.bin").read_bytes() == (dirs[r] / f"model-{r:05d}.bin").read_bytes()
    listed = {f.path: f.xet_hash for f in HfApi(endpoint=hub.url, token=TOKEN).list_bucket_tree("local-user/ckpts",
                                                                                              recursive=True)}
    assert list(listed).count("run-1/checkpoint-5/ckpt-manifest.json") == 1
    # the manifest records the Xet hash each rank's upload answered, as the listing reports it
    files = json.loads((pulled / "ckpt-manifest.json").read_bytes())["files"]
    assert {rel: entry.get("xet") for rel, entry in files.items()} == {
        rel: listed[f"run-1/checkpoint-5/{rel}"] for rel in files}


def test_a_rank_that_fails_its_bucket_upload_means_no_manifest(hub_server, xet_client, tmp_path, monkeypatch):
    from huggingface_hub import HfApi

    from ckpt_action.stores.bucket import BucketStore
    from tests.helpers.localhub_fixtures import TOKEN

    hub = hub_server(token=TOKEN)
    real = BucketStore.upload

    def upload(self, folder, files, **kwargs):
        if threading.current_thread().name == "rank 2":
            raise OSError("disk gone")
        return real(self, folder, files, **kwargs)

    monkeypatch.setattr(BucketStore, "upload", upload)
    dirs = _dirs(tmp_path, 3)
    got = _on_ranks(monkeypatch, 3, lambda r: ckpt.push(dirs[r], "hf://buckets/local-user/ckpts", step=5,
                                                        distributed=True, endpoint=hub.url, token=TOKEN))
    _same_error(got)
    paths = [f.path for f in HfApi(endpoint=hub.url, token=TOKEN).list_bucket_tree("local-user/ckpts")]
    assert paths and not any(p.endswith("ckpt-manifest.json") for p in paths), paths
