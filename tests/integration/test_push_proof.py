"""push proves what landed before it reports a SHA.

A job that is still writing its checkpoint while push runs must never get exit 0 with
a SHA that ``latest`` skips and ``pull`` refuses. The files are changed at the moment
the client asks the Hub how to upload them (the preupload request), i.e. after push
hashed them and before their bytes are sent, by a proxy in front of the local Hub.
"""

from __future__ import annotations

import base64
import json

import pytest

from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT, digest_file
from tests.conftest import read_tree, write_checkpoint
from tests.helpers.chaos_helpers import (
    assert_complete,
    ckpt,
    env_for,
    one_line_error,
    remote_checkpoint,
    reports_nothing,
)
from tests.helpers.commit_proxy import COMMIT, CommitProxy

PREUPLOAD = r"/preupload/"


def _pulls(cli, hub, tmp_path, sha, want):
    dest = tmp_path / f"pulled-{sha[:8]}"
    env = env_for(hub, tmp_path)
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--revision", sha, "--local-dir", str(dest),
                 env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == want
    latest = cli("latest", "--repo", "o/r", "--json", env=env)
    assert latest.code == 0, latest.stderr
    assert (latest.json["subfolder"], latest.json["revision"]) == ("checkpoint-1", sha)


def test_a_regular_file_changed_after_hashing_is_pushed_as_it_ends(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    files = ckpt(1)
    src = write_checkpoint(tmp_path / "src", files)
    # Same size, so only the stat's time (or, for a file this fresh, a second read) can tell.
    changed = files["config.json"].replace(b'"step": 1', b'"step": 2')
    assert len(changed) == len(files["config.json"]) and changed != files["config.json"]
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", PREUPLOAD, lambda: (src / "config.json").write_bytes(changed))
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path))
    assert run.code == 0, run.stderr
    want = files | {"config.json": changed}
    sha = run.json["revision"]
    manifest, got = remote_checkpoint(hub.url, "o/r", "checkpoint-1", sha, hf_client)
    assert_complete(manifest, got, want)
    assert run.json["commits"] == 2, "the first commit held other bytes than its manifest: one more converges"
    _pulls(cli, hub, tmp_path, sha, want)


def test_an_lfs_file_changed_after_hashing_is_pushed_as_it_ends(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    files = ckpt(1)
    src = write_checkpoint(tmp_path / "src", files)
    grown = files["model.safetensors"] + b"written late"
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", PREUPLOAD, lambda: (src / "model.safetensors").write_bytes(grown))
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path))
    assert run.code == 0, run.stderr
    want = files | {"model.safetensors": grown}
    manifest, got = remote_checkpoint(hub.url, "o/r", "checkpoint-1", run.json["revision"], hf_client)
    assert_complete(manifest, got, want)
    _pulls(cli, hub, tmp_path, run.json["revision"], want)


@pytest.mark.parametrize("change", ["added", "removed"])
def test_a_file_added_or_removed_while_pushing_ends_as_the_directory_ends(change, hub_server, hf_client, cli,
                                                                          tmp_path):
    hub = hub_server()
    files = ckpt(1)
    src = write_checkpoint(tmp_path / "src", files)
    if change == "added":
        want = files | {"late.txt": b"written after the push started"}
        act = lambda: (src / "late.txt").write_bytes(want["late.txt"])  # noqa: E731
    else:
        want = {k: v for k, v in files.items() if k != "model.safetensors"}
        act = (src / "model.safetensors").unlink
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", PREUPLOAD, act)
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path))
    assert run.code == 0, run.stderr
    manifest, got = remote_checkpoint(hub.url, "o/r", "checkpoint-1", run.json["revision"], hf_client)
    assert_complete(manifest, got, want)
    _pulls(cli, hub, tmp_path, run.json["revision"], want)


def test_a_directory_that_keeps_changing_fails_naming_the_file(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    src = write_checkpoint(tmp_path / "src", ckpt(1))
    writes = []

    def write_again() -> None:
        writes.append(1)
        (src / "nested" / "trainer_state.json").write_text(json.dumps({"global_step": 1000 + len(writes)}))

    gh_out = tmp_path / "gh-output"
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", PREUPLOAD, write_again, times=-1)
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path, GITHUB_OUTPUT=str(gh_out)))
    assert run.code == 1, run.stdout + run.stderr
    line = one_line_error(run.stderr)
    assert "nested/trainer_state.json" in line and "changed" in line, line
    assert reports_nothing(run) and (not gh_out.exists() or "revision" not in gh_out.read_text())
    assert len(writes) >= 2


def test_a_hub_that_stores_other_bytes_than_sent_is_an_error(hub_server, hf_client, cli, tmp_path):
    """The local files never change; the commit body is altered on its way to the Hub."""
    hub = hub_server()
    src = write_checkpoint(tmp_path / "src", ckpt(1))

    def tamper(body: bytes) -> bytes:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        for line in lines:
            if line["key"] == "file" and line["value"]["path"].endswith("/config.json"):
                line["value"]["content"] = base64.b64encode(b'{"tampered": true}').decode()
        return b"\n".join(json.dumps(line).encode() for line in lines)

    with CommitProxy(hub.url) as proxy:
        proxy.rewrite("POST", COMMIT, tamper)
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path))
    assert run.code == 1, run.stdout + run.stderr
    line = one_line_error(run.stderr)
    assert "config.json differs" in line and "not what was sent" in line, line
    assert reports_nothing(run)


def test_the_proof_costs_one_request_and_a_no_op_push_none(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    env = env_for(hub, tmp_path)
    files = ckpt(1)
    first = cli("push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / "a", files)), "--step", "1",
                env=env)
    assert first.code == 0, first.stderr
    changed = files | {"config.json": b"{}"}
    src = write_checkpoint(tmp_path / "b", changed)

    def requests(*args):
        start = len(hub.log_entries())
        run = cli(*args, env=env)
        assert run.code == 0, run.stderr
        return [e for e in hub.log_entries()[start:]]

    push = ("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json")
    entries = requests(*push)
    # One listing to plan, one commit, and the proof: the folder's tree id, one paths-info.
    assert len([e for e in entries if "/paths-info/" in e["path"]]) == 1
    assert len([e for e in entries if e["method"] == "GET" and "/tree/" in e["path"]]) == 1
    assert len([e for e in entries if e["method"] == "POST" and "/commit/" in e["path"]]) == 1
    again = requests(*push)
    assert not [e for e in again if "/paths-info/" in e["path"] or "/commit/" in e["path"]], (
        "a no-op push is proven by the listing it planned with")


def test_a_file_modified_just_before_its_stat_is_read_again(tmp_path, monkeypatch):
    """A coarse file-system clock can leave size, mtime and ctime unchanged across a write
    made right after the stat; files that fresh are read again after the upload."""
    import importlib

    # The module, not the package's push() function of the same name.
    push_module = importlib.import_module("ckpt_action.ops.push")

    monkeypatch.setattr(push_module, "_RACY_NS", 3600 * 10**9)  # "just before", however slow this machine is
    src = write_checkpoint(tmp_path / "src", {"a.txt": b"one", "b.txt": b"two"})
    local = push_module.LocalDir(src, "test")
    frozen = dict(local.stamps)
    (src / "a.txt").write_bytes(b"ONE")  # same size
    monkeypatch.setattr(push_module, "_stamp", lambda path: frozen[path.name][0])
    assert local.refresh() == [], "the stat alone cannot see this write"
    assert local.refresh(thorough=True) == ["a.txt"]
    assert local.digests["a.txt"].sha256 == digest_file(src / "a.txt").sha256


@pytest.mark.parametrize(("when", "commits"), [(PREUPLOAD, 1), (COMMIT, 2)], ids=["before-its-read", "after-it"])
def test_a_big_file_hashed_by_its_upload_and_changed_is_pushed_as_it_ends(when, commits, hub_server, hf_client, cli,
                                                                            tmp_path):
    """Above GIT_OID_LIMIT the upload's own read gives the sha256 (one read): a write
    before that read is what gets uploaded and listed; one after it shows in the stat
    taken before the read, and one more commit converges."""
    hub = hub_server()
    files = ckpt(1, big=GIT_OID_LIMIT + 1)
    src = write_checkpoint(tmp_path / "src", files)
    changed = bytes(reversed(files["model.safetensors"]))
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", when, lambda: (src / "model.safetensors").write_bytes(changed))
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json",
                  env=env_for(proxy, tmp_path))
    assert run.code == 0, run.stderr
    want = files | {"model.safetensors": changed}
    manifest, got = remote_checkpoint(hub.url, "o/r", "checkpoint-1", run.json["revision"], hf_client)
    assert_complete(manifest, got, want)
    assert run.json["commits"] == commits
