"""The one commit primitive (hub.commits.commit) and the promises push, promote and prune
make through it: every commit is pinned to a head, a commit that landed behind an error
is counted once and never repeated, --retries bounds every writer the same way, and a
push split in parts is marked complete only in its last part.

In-process tests drive the primitive directly against the in-process local Hub; the
others run the real CLI with a proxy (tests/helpers/commit_proxy.py) in front of a local Hub.
"""

from __future__ import annotations

import json

import pytest

from ckpt_action.errors import RemoteError
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.commits import MAX_CONFLICTS, commit
from ckpt_action.stores.hub.repo import RemoteRepo
from ckpt_action.stores.writes import Write
from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import commit_ids, env_for, head_of, one_line_error
from tests.helpers.commit_proxy import COMMIT, CommitProxy

# --- in process -------------------------------------------------------------------------------


@pytest.fixture
def remote_for(local_hub, monkeypatch):
    """RemoteRepo factory for the in-process Hub (or a proxy in front of it), with fast retries."""
    for name in ("HF_ENDPOINT", "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
        monkeypatch.setenv(name, "")  # recorded, so teardown restores what was there
        monkeypatch.delenv(name)  # prepare() sets them for the endpoint

    def make(url: str | None = None, retries: int = 2) -> RemoteRepo:
        settings = Settings(url or local_hub.url, timeout=20, retries=retries, retry_delay=0.01, retry_max_delay=0.02)
        remote = RemoteRepo(settings, "o/r")
        remote.api.create_repo("o/r", exist_ok=True)
        return remote

    return make


def _add(path: str, data: bytes) -> object:
    from huggingface_hub import CommitOperationAdd

    return CommitOperationAdd(path, data)


def _files(remote: RemoteRepo, sha: str) -> set[str]:
    return set(remote.api.list_repo_files(remote.repo, revision=sha))


def test_a_writer_racing_in_between_makes_the_commit_re_plan(remote_for):
    """Without parent_commit the first attempt would land on top of the racer unseen."""
    remote = remote_for()
    heads: list[str | None] = []

    def plan(head):
        heads.append(head)
        if len(heads) == 1:  # another writer commits after this head was read
            remote.api.create_commit("o/r", operations=[_add("theirs.txt", b"t")], commit_message="racer")
        return None if "mine.txt" in _files(remote, head) else Write([_add("mine.txt", b"m")], "mine")

    start = remote.resolve(None)
    outcome = commit(remote, plan, what="test")
    racer = commit_ids(remote.settings.endpoint, "o/r")[1]
    assert heads == [start, racer], "the commit was not refused as stale, so it was not pinned"
    assert outcome.writes == 1 and outcome.pin == head_of(remote.settings.endpoint, "o/r")
    assert {"theirs.txt", "mine.txt"} <= _files(remote, outcome.pin)


def test_conflicts_are_bounded(remote_for):
    remote = remote_for()
    rounds = []

    def plan(head):
        rounds.append(head)
        remote.api.create_commit("o/r", operations=[_add("theirs.txt", b"%d" % len(rounds))], commit_message="racer")
        return Write([_add("mine.txt", b"m")], "mine")

    with pytest.raises(RemoteError, match="kept moving"):
        commit(remote, plan, what="test")
    assert len(rounds) == MAX_CONFLICTS + 1


def test_a_commit_that_landed_behind_a_500_is_counted_once(local_hub, remote_for):
    with CommitProxy(local_hub.url) as proxy:
        remote = remote_for(proxy.url)
        proxy.after("POST", COMMIT, status=500)
        plans = []

        def plan(head):
            plans.append(head)
            return None if "mine.txt" in _files(remote, head) else Write([_add("mine.txt", b"m")], "mine")

        outcome = commit(remote, plan, what="test")
        posts = proxy.commits()
    assert [p.status for p in posts] == [500] and posts[0].upstream_status == 200
    assert outcome.writes == 1 and outcome.last is None, "the planner's read proved it, no second commit"
    assert len(plans) == 2 and outcome.pin == head_of(local_hub.url, "o/r")


def test_ambiguous_failures_are_bounded_by_retries(local_hub, remote_for):
    with CommitProxy(local_hub.url) as proxy:
        remote = remote_for(proxy.url, retries=2)
        proxy.fail("POST", COMMIT, status=503, times=-1)
        with pytest.raises(RemoteError, match="503"):
            commit(remote, lambda head: Write([_add("mine.txt", b"m")], "mine"), what="test")
        assert len(proxy.commits()) == 3, "one attempt and --retries 2 retries"


def test_history_pages_on_the_endpoint_only(local_hub, remote_for):
    """The history read that counts a landed commit follows the Hub's next pages, bounded,
    and never to another host (the request carries the token)."""
    remote = remote_for()
    for i in range(55):  # the local Hub, like the Hub, pages commits by 50
        remote.api.create_commit("o/r", operations=[_add("n.txt", b"%d" % i)], commit_message=f"c{i}")
    head = remote.resolve(None)
    assert head is not None
    assert len(remote.history(head, until=None, limit=53)) == 53
    ids = commit_ids(local_hub.url, "o/r")
    assert [oid for oid, _text in remote.history(head, until=ids[2], limit=100)] == ids[:3]
    with CommitProxy(local_hub.url) as sink, CommitProxy(local_hub.url) as proxy:
        proxy.add_headers("GET", r"/commits/", {"Link": f'<{sink.url}/api/models/o/r/commits/{head}?p=1>; rel="next"'})
        far = remote_for(proxy.url)
        assert len(far.history(head, until=None, limit=100)) == 50
        assert sink.seen == [], "a next page on another host was requested"


# --- through the CLI --------------------------------------------------------------------------


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def _push(cli, env, tmp_path, step, files=None, **extra):
    files = files or {"model.safetensors": bytes([step]) * 300_000, "config.json": b'{"step": %d}' % step}
    src = write_checkpoint(tmp_path / f"src-{step}", files)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), "--json", env=env, **extra)
    assert run.code == 0, run.stderr
    return run.json


def _titles(url: str) -> list[str]:
    from huggingface_hub import HfApi

    return [c.title for c in HfApi(endpoint=url).list_repo_commits("o/r")]


def test_a_push_whose_commit_landed_behind_a_500_counts_it(hub, cli, tmp_path):
    with CommitProxy(hub.url) as proxy:
        proxy.after("POST", COMMIT, status=500)
        out = _push(cli, env_for(proxy, tmp_path), tmp_path, 1)
        posts = proxy.commits()
    assert [p.status for p in posts] == [500], "the push committed again instead of reading what landed"
    assert out["commits"] == 1 and out["uploaded_files"] == 2
    assert out["revision"] == head_of(hub.url, "o/r")
    assert sum(t.startswith("Push ") for t in _titles(hub.url)) == 1


def test_a_split_push_counts_a_part_that_landed_behind_a_500(hub, cli, tmp_path):
    files = {f"f{i}.txt": b"%d" % i for i in range(7)}
    with CommitProxy(hub.url) as proxy:
        # The second commit lands, then the client is told 500.
        proxy.before("POST", COMMIT, lambda: proxy.after("POST", COMMIT, status=500))
        out = _push(cli, env_for(proxy, tmp_path, CKPT_MAX_FILES_PER_COMMIT="3"), tmp_path, 3, files=files)
        posts = proxy.commits()
    assert [p.status for p in posts] == [200, 500, 200, 200]
    assert out["commits"] == 4 and out["uploaded_files"] == 7
    assert sum(t.startswith("Push ") for t in _titles(hub.url)) == 4


def test_promote_and_prune_behind_a_500_report_what_landed(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    _push(cli, env, tmp_path, 1)
    _push(cli, env, tmp_path, 2)
    with CommitProxy(hub.url) as proxy:
        penv = env_for(proxy, tmp_path)
        proxy.after("POST", COMMIT, status=500)
        promoted = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", "--tag", "v1",
                       "--json", env=penv)
        assert promoted.code == 0, promoted.stderr
        proxy.after("POST", COMMIT, status=500)
        pruned = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=penv)
        assert pruned.code == 0, pruned.stderr
        assert [p.status for p in proxy.commits()] == [500, 500], "a landed commit was made again"
    assert promoted.json["commits"] == 1
    from huggingface_hub import HfApi

    tags = {t.name: t.target_commit for t in HfApi(endpoint=hub.url).list_repo_refs("o/r").tags}
    assert tags["v1"] == promoted.json["revision"]
    assert pruned.json["deleted"] == ["checkpoint-1"] and pruned.json["revision"] == head_of(hub.url, "o/r")
    titles = _titles(hub.url)  # newest first
    assert titles[0].startswith("Prune ") and titles[1].startswith("Promote ") and titles[2].startswith("Push ")


def test_every_commit_is_pinned_to_the_head_it_was_planned_at(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    _push(cli, env, tmp_path, 1)
    files = {f"f{i}.txt": b"%d" % i for i in range(7)}
    with CommitProxy(hub.url) as proxy:
        penv = env_for(proxy, tmp_path, CKPT_MAX_FILES_PER_COMMIT="3")
        _push(cli, penv, tmp_path, 2, files=files)
        assert cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", env=penv).code == 0
        assert cli("prune", "--repo", "o/r", "--keep-last", "1", env=penv).code == 0
        posts = proxy.commits()
    history = list(reversed(commit_ids(hub.url, "o/r")))  # oldest first
    assert len(posts) == 6, "4 parts, a promote, a prune"
    for post in posts:
        header = json.loads(post.body.split(b"\n", 1)[0])["value"]
        made = json.loads(post.answer)["commitOid"]
        assert header.get("parentCommit") == history[history.index(made) - 1], header["summary"]


@pytest.mark.parametrize("mode", ["push", "promote", "prune"])
def test_retries_bound_every_writer_the_same(mode, hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    _push(cli, env, tmp_path, 1)
    _push(cli, env, tmp_path, 2)
    before = commit_ids(hub.url, "o/r")
    args = {
        "push": ["push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / "new", {"n.txt": b"n"})),
                 "--step", "3"],
        "promote": ["promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release"],
        "prune": ["prune", "--repo", "o/r", "--keep-last", "1"],
    }[mode]
    with CommitProxy(hub.url) as proxy:
        proxy.fail("POST", COMMIT, status=503, times=-1)
        run = cli(*args, "--retries", "2", env=env_for(proxy, tmp_path))
        posts = proxy.commits()
    assert run.code == 1 and "503" in one_line_error(run.stderr)
    assert len(posts) == 3, f"{mode}: {len(posts)} commit attempts; --retries 2 allows 3"
    assert commit_ids(hub.url, "o/r") == before


def test_a_split_push_marks_only_its_last_part_complete(hub, hf_client, cli, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download

    files = {f"f{i}.txt": b"file %d" % i for i in range(7)}
    out = _push(cli, env_for(hub, tmp_path, CKPT_MAX_FILES_PER_COMMIT="3"), tmp_path, 4, files=files)
    api = HfApi(endpoint=hub.url)
    parts = [c for c in reversed(api.list_repo_commits("o/r")) if c.title.startswith("Push ")]
    assert len(parts) == out["commits"] == 4, "7 files, 2 per commit beside the manifest"
    assert parts[-1].commit_id == out["revision"]
    for i, part in enumerate(parts):
        path = hf_hub_download("o/r", "checkpoint-4/ckpt-manifest.json", revision=part.commit_id, endpoint=hub.url,
                               cache_dir=str(hf_client))
        with open(path, "rb") as fh:
            manifest = json.load(fh)
        assert manifest["complete"] is (i == len(parts) - 1), f"part {i + 1}: complete={manifest['complete']}"
        assert set(manifest["files"]) == set(files)
        held = {p for p in api.list_repo_files("o/r", revision=part.commit_id) if p.startswith("checkpoint-4/")}
        assert len(held) == min(2 * (i + 1), 7) + 1
