"""Every command on a Storage Bucket (``hf://buckets/ORG/NAME``), through the CLI in process
against the local Hub: push, latest, pull by pin and by --latest, list, prune, promote."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from huggingface_hub import HfApi

from tests.conftest import clean_env, read_tree, write_checkpoint
from tests.helpers.localhub_fixtures import TOKEN

BUCKET = "local-user/ckpts"
URI = f"hf://buckets/{BUCKET}"
MANIFEST = "ckpt-manifest.json"


@pytest.fixture
def hub(hub_server, xet_client):
    return hub_server(token=TOKEN)


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


def _push(cli, env, tmp_path, step, files=None, repo=URI):
    files = files or {"model.safetensors": os.urandom(200_000) + bytes([step]), "config.json": b'{"s": %d}' % step}
    src = write_checkpoint(tmp_path / f"src-{step}-{len(files)}", files)
    run = cli("push", "--repo", repo, "--local-dir", str(src), "--step", str(step), "--json", env=env)
    assert run.code == 0, run.stderr
    return run.json, files


def _paths(api, prefix=None):
    return sorted(f.path for f in api.list_bucket_tree(BUCKET, prefix, recursive=True))


def test_a_push_sends_files_and_manifest_in_one_xet_session(cli, env, api, hub, tmp_path):
    """The manifest's bytes go in the files' own upload session (one write token, one
    shard), still published last and alone; the big file's sha256 is taken beside the upload
    (hf_xet is not asked for it) and is the manifest's."""
    big = os.urandom(21 * 2**20)  # above the size a git id is kept for: hashed beside the upload
    out, _files = _push(cli, env, tmp_path, 4, {"model.safetensors": big, "config.json": b"{}"})
    log = hub.log_entries()
    tokens = [e for e in log if "/xet-write-token" in e["path"]]
    shards = [e for e in log if e["listener"] == "cas" and e["path"].endswith("/v1/shards") and e["status"] == 200]
    assert len(tokens) == 1 and len(shards) == 1, [e["path"] for e in log]
    batches = [e for e in log if e["method"] == "POST" and e["path"].endswith(f"/buckets/{BUCKET}/batch")]
    assert len(batches) == 2  # the files, then the manifest alone
    dest = tmp_path / "m.json"
    api.download_bucket_files(BUCKET, [(f"checkpoint-4/{MANIFEST}", dest)])
    listed = json.loads(dest.read_bytes())["files"]
    assert listed["model.safetensors"]["sha256"] == hashlib.sha256(big).hexdigest()
    assert out["revision"] == "sha256:" + hashlib.sha256(dest.read_bytes()).hexdigest()


def test_push_creates_a_private_bucket_writes_the_manifest_last_and_alone_and_pins_it(cli, env, api, hub, tmp_path):
    out, files = _push(cli, env, tmp_path, 3)
    assert api.bucket_info(BUCKET).private is True
    assert out["repo"] == URI and out["subfolder"] == "checkpoint-3"
    dest = tmp_path / "m.json"
    api.download_bucket_files(BUCKET, [(f"checkpoint-3/{MANIFEST}", dest)])
    assert out["revision"] == "sha256:" + hashlib.sha256(dest.read_bytes()).hexdigest()
    assert out["hub_url"] == f"{hub.url}/buckets/{BUCKET}/tree/checkpoint-3"
    assert _paths(api) == sorted(["checkpoint-3/config.json", f"checkpoint-3/{MANIFEST}",
                                  "checkpoint-3/model.safetensors"])
    batches = [e for e in hub.log_entries() if e["method"] == "POST" and e["path"].endswith(f"/buckets/{BUCKET}/batch")]
    assert len(batches) == 2  # the files, then the manifest alone
    # latest takes it, pinned to the manifest it read; pull by that pin and by --latest
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["revision"] == out["revision"], found.stderr
    got = cli("pull", "--repo", URI, "--subfolder", "checkpoint-3", "--revision", out["revision"],
              "--local-dir", str(tmp_path / "p1"), "--json", env=env)
    assert got.code == 0, got.stderr
    tree = read_tree(tmp_path / "p1")
    tree.pop(MANIFEST)
    assert tree == files
    got = cli("pull", "--repo", URI, "--latest", "--local-dir", str(tmp_path / "p2"), "--json", env=env)
    assert got.code == 0 and got.json["revision"] == out["revision"], got.stderr


def test_a_torn_folder_is_never_latest_nor_pulled_and_is_listed_incomplete(cli, env, api, tmp_path):
    good, _files = _push(cli, env, tmp_path, 1)
    for step in (2, 3, 4):
        _push(cli, env, tmp_path, step)
    api.batch_bucket_files(BUCKET, delete=[f"checkpoint-4/{MANIFEST}"])  # cut short before its manifest
    api.batch_bucket_files(BUCKET, delete=["checkpoint-3/config.json"])  # a file missing
    api.batch_bucket_files(BUCKET, add=[(b"short", "checkpoint-2/model.safetensors")])  # a file of another size
    api.batch_bucket_files(BUCKET, add=[(b"x", "checkpoint-5/model.safetensors")])  # never had a manifest
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0, found.stderr
    assert (found.json["subfolder"], found.json["revision"]) == ("checkpoint-1", good["revision"])
    for step in (2, 3, 4, 5):
        run = cli("pull", "--repo", URI, "--subfolder", f"checkpoint-{step}", "--local-dir",
                  str(tmp_path / f"p{step}"), env=env)
        assert run.code == 1 and "not a complete checkpoint" in run.stderr, (step, run.stderr)
        assert not (tmp_path / f"p{step}").exists()
    listed = cli("list", "--repo", URI, "--json", env=env)
    assert listed.code == 0, listed.stderr
    status = {c["subfolder"]: c["complete"] for c in listed.json["checkpoints"]}
    assert status == {"checkpoint-1": True, "checkpoint-2": False, "checkpoint-3": False, "checkpoint-4": False,
                      "checkpoint-5": False}
    # under a prefix holding only folders without a manifest (a tool that wrote there, or every
    # push cut short), none is a checkpoint: in a bucket no manifest means not complete
    api.batch_bucket_files(BUCKET, add=[(b"w", "run-7/checkpoint-8/model.safetensors")])
    found = cli("latest", "--repo", f"{URI}/run-7", "--json", env=env)
    assert found.code == 0 and found.json == {"repo": f"{URI}/run-7", "found": False}
    assert "in a bucket a folder without one is a push cut short" in found.stderr
    listed = cli("list", "--repo", f"{URI}/run-7", "--json", env=env)
    assert [(c["subfolder"], c["complete"]) for c in listed.json["checkpoints"]] == [("checkpoint-8", False)]


def test_a_pull_at_a_pin_fails_once_the_folder_is_overwritten(cli, env, api, tmp_path):
    first, _files = _push(cli, env, tmp_path, 1)
    second, _files = _push(cli, env, tmp_path, 1)  # a re-push over the folder, other bytes
    assert second["revision"] != first["revision"]
    run = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--revision", first["revision"],
              "--local-dir", str(tmp_path / "p"), env=env)
    assert run.code == 1 and "overwritten since it was pinned" in run.stderr, run.stderr
    assert not (tmp_path / "p").exists()
    # the same bytes swapped under an unchanged manifest: refused by the bytes, not handed over
    api.batch_bucket_files(BUCKET, add=[(b'{"s": 9}', "checkpoint-1/config.json")])  # same size, other bytes
    run = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--revision", second["revision"],
              "--local-dir", str(tmp_path / "p"), env=env)
    assert run.code == 1 and "overwritten since it was pinned" in run.stderr, run.stderr
    assert not (tmp_path / "p").exists()


def test_a_file_overwritten_with_other_bytes_of_the_same_size_is_seen_in_the_listing_by_its_xet_hash(
        cli, env, api, tmp_path):
    """The listing gives sizes and Xet hashes, the manifest names both: a file overwritten
    after the manifest was written, same size, other bytes, makes the folder incomplete for
    latest, list and a pull by its pin, in a process that never saw the push."""
    first, _files = _push(cli, env, tmp_path, 1)
    second, files = _push(cli, env, tmp_path, 2)
    dest = tmp_path / "m2.json"
    api.download_bucket_files(BUCKET, [(f"checkpoint-2/{MANIFEST}", dest)])
    listed = {f.path: f.xet_hash for f in api.list_bucket_tree(BUCKET, "checkpoint-2/", recursive=True)}
    recorded = json.loads(dest.read_bytes())["files"]
    assert {rel: entry["xet"] for rel, entry in recorded.items()} == {
        rel: listed[f"checkpoint-2/{rel}"] for rel in files}  # every file, small ones too
    other = os.urandom(len(files["model.safetensors"]))
    api.batch_bucket_files(BUCKET, add=[(other, "checkpoint-2/model.safetensors")])
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0, found.stderr
    assert (found.json["subfolder"], found.json["revision"]) == ("checkpoint-1", first["revision"])
    listing = cli("list", "--repo", URI, "--json", env=env)
    assert listing.code == 0, listing.stderr
    row = {c["subfolder"]: c for c in listing.json["checkpoints"]}["checkpoint-2"]
    assert row["complete"] is False and row["problem"].startswith("model.safetensors was overwritten"), row
    run = cli("pull", "--repo", URI, "--subfolder", "checkpoint-2", "--revision", second["revision"],
              "--local-dir", str(tmp_path / "p"), env=env)
    assert run.code == 1 and "overwritten since it was pinned" in run.stderr, run.stderr
    assert "model.safetensors" in run.stderr and not (tmp_path / "p").exists()
    got = cli("pull", "--repo", URI, "--latest", "--local-dir", str(tmp_path / "q"), "--json", env=env)
    assert got.code == 0 and got.json["subfolder"] == "checkpoint-1", got.stderr


def test_every_file_is_written_before_the_manifest_which_is_written_alone(cli, env, api, hub, tmp_path):
    """From the bucket's change feed (one event per batch that changed it): the manifest is the
    one change of the push's last batch, after every file, small ones too, and a signed push's
    signature and statement."""
    import httpx

    from tests.helpers.signing_helpers import make_key

    key = make_key(tmp_path)
    files = {"model.safetensors": os.urandom(100_000), "config.json": b"{}", "sub/tok.txt": b"t"}
    src = write_checkpoint(tmp_path / "src", files)
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--step", "4", "--signing-key", str(key.private),
              env=env)
    assert run.code == 0, run.stderr
    feed = httpx.get(f"{hub.url}/api/buckets/{BUCKET}/events", params={"since": "1970-01-01T00:00:00Z"},
                     headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    batches = [[(c["path"], c["op"]) for c in json.loads(block.split("data: ", 1)[1])["changes"]]
               for block in feed.text.split("\n\n") if block.startswith("event: changes")]
    assert batches[-1] == [(f"checkpoint-4/{MANIFEST}", "add")], batches
    before = {path for batch in batches[:-1] for path, _op in batch}
    assert before == {f"checkpoint-4/{rel}" for rel in [*files, "model.sig", "ckpt-provenance.json"]}, batches


def test_a_re_push_takes_the_old_manifest_away_before_any_file(cli, env, hub, tmp_path):
    _push(cli, env, tmp_path, 1)
    start = len(hub.log_entries())
    _push(cli, env, tmp_path, 1)
    posts = [e for e in hub.log_entries()[start:] if e["method"] == "POST" and "/api/buckets/" in e["path"]]
    kinds = [e["path"].rsplit("/", 1)[1] for e in posts]
    # paths-info finds the manifest; its delete is the first batch; the files; the manifest alone
    assert kinds[:2] == ["paths-info", "batch"] and kinds.count("batch") == 3, kinds


def test_latest_on_a_thousand_folders_answers_in_a_bounded_number_of_requests(cli, env, api, hub, tmp_path):
    """The bound: 1 per 1,000 top-level entries (the folder listing) + 3 per folder examined
    from the highest down (its manifest, which the Hub's resolve answers with a redirect to the
    bytes, counted too, and its files' listing); a folder with no manifest costs 1. No request
    asks whether the bucket exists: the listing answers that.
    Here: the highest folder has no manifest, the next is complete: 1 + 1 + 3 = 5; once the torn
    one is gone, 1 + 3 = 4."""
    _push(cli, env, tmp_path, 1)
    files = {f.path: f for f in api.list_bucket_tree(BUCKET, "checkpoint-1/", recursive=True)}
    copies = [("bucket", BUCKET, f.xet_hash, path.replace("checkpoint-1/", f"checkpoint-{n}/"))
              for n in range(2, 1000) for path, f in files.items()]
    copies += [("bucket", BUCKET, f.xet_hash, path.replace("checkpoint-1/", "checkpoint-1000/"))
               for path, f in files.items() if not path.endswith(MANIFEST)]  # the newest was cut short
    api.batch_bucket_files(BUCKET, copy=copies)
    assert len(list(api.list_bucket_tree(BUCKET, recursive=False))) == 1000
    start = len(hub.log_entries())
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["subfolder"] == "checkpoint-999", found.stderr
    log = hub.log_entries()[start:]
    assert len(log) == 5, [(e["listener"], e["method"], e["path"], e["status"]) for e in log]
    assert [e["listener"] for e in log].count("cdn") == 1
    api.batch_bucket_files(BUCKET, delete=[p.replace("checkpoint-1/", "checkpoint-1000/") for p in files
                                           if not p.endswith(MANIFEST)])
    start = len(hub.log_entries())
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["subfolder"] == "checkpoint-999", found.stderr
    log = hub.log_entries()[start:]
    assert len(log) == 4, [(e["listener"], e["method"], e["path"], e["status"]) for e in log]


def test_prune_deletes_whole_folders_manifest_first_and_reports_the_usage_freed(cli, env, api, hub, tmp_path):
    for step in (1, 2, 3):
        _push(cli, env, tmp_path, step)
    before = api.bucket_info(BUCKET).size
    start = len(hub.log_entries())
    run = cli("prune", "--repo", URI, "--keep-last", "1", "--json", env=env)
    assert run.code == 0, run.stderr
    assert sorted(run.json["deleted"]) == ["checkpoint-1", "checkpoint-2"] and run.json["kept"] == ["checkpoint-3"]
    assert run.json["used_storage_before"] == before
    assert run.json["used_storage_after"] == api.bucket_info(BUCKET).size < before
    assert run.json["freed_bytes"] == before - run.json["used_storage_after"]
    assert _paths(api) == sorted(["checkpoint-3/config.json", f"checkpoint-3/{MANIFEST}",
                                  "checkpoint-3/model.safetensors"])
    batches = [e for e in hub.log_entries()[start:] if e["method"] == "POST" and e["path"].endswith("/batch")]
    assert len(batches) == 3  # each folder's manifest alone, then the files of both


@pytest.mark.parametrize("flags", [[], ["--free-storage"]], ids=["plain", "free-storage"])
def test_prune_on_a_bucket_says_in_text_what_it_freed_with_or_without_free_storage(cli, env, tmp_path, flags):
    """A bucket's prune frees at once: the text says so as the outputs do (no object count: a
    bucket frees by path, never 'None object(s)')."""
    for step in (1, 2):
        _push(cli, env, tmp_path, step)
    run = cli("prune", "--repo", URI, "--keep-last", "1", *flags, env=env)
    assert run.code == 0, run.stderr
    freed = [line for line in run.stderr.splitlines() if line.startswith("freed: ")]
    assert len(freed) == 1 and "of Hub storage (used before: " in freed[0], run.stderr
    assert "None" not in run.stderr and "object(s)" not in freed[0]


def test_promote_within_a_bucket_copies_server_side_by_xet_hash(cli, env, api, hub, tmp_path):
    pushed, files = _push(cli, env, tmp_path, 4)
    start = len(hub.log_entries())
    run = cli("promote", "--repo", URI, "--subfolder", "checkpoint-4", "--revision", pushed["revision"],
              "--to", "release/checkpoint-4", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["source_revision"] == pushed["revision"] and run.json["revision"].startswith("sha256:")
    log = hub.log_entries()[start:]
    sent = sum(e.get("bytes_in", 0) for e in log if e["listener"] == "cas")
    assert sent < 10_000, [(e["method"], e["path"], e.get("bytes_in")) for e in log if e["listener"] == "cas"]
    got = cli("pull", "--repo", URI, "--subfolder", "release/checkpoint-4", "--revision", run.json["revision"],
              "--local-dir", str(tmp_path / "rel"), "--json", env=env)
    assert got.code == 0, got.stderr
    tree = read_tree(tmp_path / "rel")
    tree.pop(MANIFEST)
    assert tree == files
    # prune never deletes the source of a promoted folder
    _push(cli, env, tmp_path, 5)
    _push(cli, env, tmp_path, 6)
    pruned = cli("prune", "--repo", URI, "--keep-last", "1", "--json", env=env)
    assert pruned.code == 0 and pruned.json["deleted"] == ["checkpoint-5"], pruned.stdout + pruned.stderr


def test_promote_from_a_bucket_into_a_model_repo_is_one_commit_pinned_and_tagged(cli, env, api, tmp_path):
    pushed, files = _push(cli, env, tmp_path, 7)
    api.create_repo("local-user/model", private=True)
    run = cli("promote", "--repo", URI, "--subfolder", "checkpoint-7", "--revision", pushed["revision"],
              "--to", "release", "--to-repo", "local-user/model", "--tag", "v1", "--json", env=env)
    assert run.code == 0, run.stderr
    sha = run.json["revision"]
    assert len(sha) == 40 and run.json["repo"] == "local-user/model" and run.json["commits"] == 1
    assert run.json["source_revision"] == pushed["revision"] and run.json["tag"] == "v1"
    commits = api.list_repo_commits("local-user/model")
    assert commits[0].commit_id == sha
    refs = api.list_repo_refs("local-user/model")
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", sha)]
    got = cli("pull", "--repo", "local-user/model", "--subfolder", "release", "--revision", "v1",
              "--local-dir", str(tmp_path / "rel"), "--json", env=env)
    assert got.code == 0 and got.json["revision"] == sha and got.json["verified_by"] == "manifest", got.stderr
    tree = read_tree(tmp_path / "rel")
    manifest = tree.pop(MANIFEST)
    assert tree == files and pushed["revision"].encode() in manifest  # the manifest names the bucket pin it came from
    # a tag or a branch within a bucket is refused before anything is written
    before = _paths(api)
    bad = cli("promote", "--repo", URI, "--subfolder", "checkpoint-7", "--to", "release", "--tag", "v2", env=env)
    assert bad.code == 2 and "a bucket has no tags" in bad.stderr, bad.stderr
    assert _paths(api) == before


def test_a_file_changed_while_the_manifest_is_written_leaves_no_manifest(cli, env, api, monkeypatch, tmp_path):
    """Another writer replaces a file between the finalize and the manifest: the push lists the
    folder again, takes its manifest away and fails, so no manifest matches neither push."""
    from ckpt_action.stores.bucket import BucketStore

    real = BucketStore._batch

    def batch(self, ops, what):
        if any(getattr(op, "path", "").endswith(MANIFEST) and getattr(op, "data", None) for op in ops):
            api.batch_bucket_files(BUCKET, add=[(b'{"other": 1}', "checkpoint-1/config.json")])
        return real(self, ops, what)

    monkeypatch.setattr(BucketStore, "_batch", batch)
    src = write_checkpoint(tmp_path / "src", {"model.safetensors": os.urandom(50_000), "config.json": b"{}"})
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--step", "1", env=env)
    assert run.code == 1 and "changed while its manifest was written" in run.stderr, run.stderr
    assert f"checkpoint-1/{MANIFEST}" not in _paths(api)
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["found"] is False


@pytest.mark.parametrize("escape", ["../../escaped.txt", "checkpoint-1/../../../escaped.txt", "/tmp/escaped.txt",
                                    "checkpoint-1/a\nb.txt"])
def test_a_hostile_bucket_listing_is_refused_and_nothing_is_written(hub_server, xet_client, cli, tmp_path, escape):
    from ckpt_action.checkpoint.manifest import Manifest, digest_bytes

    hub = hub_server(token=TOKEN, faults=[{"method": "GET", "path": "/tree", "tree_escape": escape, "times": -1}])
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_bucket(BUCKET, private=True)
    data = b"weights"
    manifest = Manifest({"w.bin": digest_bytes("w.bin", data)}, step=1).to_json()
    api.batch_bucket_files(BUCKET, add=[(data, "checkpoint-1/w.bin")])
    api.batch_bucket_files(BUCKET, add=[(manifest, f"checkpoint-1/{MANIFEST}")])
    for args in (["latest", "--repo", URI], ["list", "--repo", URI],
                 ["pull", "--repo", URI, "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "p")]):
        run = cli(*args, env=env)
        assert run.code == 1 and "refusing" in run.stderr, (args, run.stderr)
    assert not (tmp_path / "p").exists() and not (tmp_path / "escaped.txt").exists()


@pytest.mark.parametrize("name", ["../escaped.txt", "../../escaped.txt", "/tmp/escaped.txt", "a/../../escaped.txt"])
def test_a_bucket_manifest_naming_a_file_outside_its_folder_is_refused_and_nothing_is_written(
        cli, env, api, tmp_path, name):
    """The bucket twin of the repo's hostile manifest: a manifest (written by anyone who can
    write the bucket) that lists a path leaving its folder is data to refuse, never a path to
    write: latest does not take the folder, a pull of it fails, nothing appears outside."""
    import json

    from ckpt_action.checkpoint.manifest import Manifest, digest_bytes

    api.create_bucket(BUCKET, private=True)
    data = b"weights"
    doc = json.loads(Manifest({"w.bin": digest_bytes("w.bin", data)}, step=1).to_json())
    doc["files"] = {name: doc["files"]["w.bin"]}
    api.batch_bucket_files(BUCKET, add=[(data, "checkpoint-1/w.bin")])
    api.batch_bucket_files(BUCKET, add=[(json.dumps(doc).encode(), f"checkpoint-1/{MANIFEST}")])
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["found"] is False, (found.stdout, found.stderr)
    assert "unusable path" in found.stderr, found.stderr  # refused as data, not merely found missing
    dest = tmp_path / "deep" / "p"
    run = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--local-dir", str(dest), env=env)
    assert run.code == 1 and "unusable path" in run.stderr, run.stderr
    assert not dest.exists() and not (tmp_path / "deep" / "escaped.txt").exists()
    assert not (tmp_path / "escaped.txt").exists() and not os.path.exists("/tmp/escaped.txt")


def test_the_finalize_refuses_a_manifest_over_a_file_replaced_after_its_upload(cli, env, api, monkeypatch, tmp_path):
    """The one finalize lists the folder afresh: a file another writer replaced after this push
    uploaded it (same size, other bytes: another Xet hash) is not the file the manifest lists."""
    from ckpt_action.stores.bucket import BucketStore

    real = BucketStore._publish

    def publish(self, wanted, manifests, what):
        api.batch_bucket_files(BUCKET, add=[(b'{"x": 2}', "checkpoint-1/config.json")])  # 8 bytes, as pushed
        return real(self, wanted, manifests, what)

    monkeypatch.setattr(BucketStore, "_publish", publish)
    src = write_checkpoint(tmp_path / "src", {"model.safetensors": os.urandom(50_000), "config.json": b'{"x": 1}'})
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--step", "1", env=env)
    assert run.code == 1 and "config.json is not the file the manifest lists" in run.stderr, run.stderr
    assert "nothing was published" in run.stderr and f"checkpoint-1/{MANIFEST}" not in _paths(api)
    assert "another writer changed checkpoint-1/ after this write sent its files" in run.stderr, run.stderr


def test_a_pointer_to_a_bucket_checkpoint_pulls_it_at_its_pin(cli, env, api, tmp_path):
    import json

    pushed, _files = _push(cli, env, tmp_path, 2)
    pointer = tmp_path / "checkpoint.json"
    pointer.write_text(json.dumps({k: pushed[k] for k in ("repo", "subfolder", "revision", "step", "hub_url")}))
    got = cli("pull", "--pointer", str(pointer), "--local-dir", str(tmp_path / "p"), "--json", env=env)
    assert got.code == 0 and got.json["revision"] == pushed["revision"], got.stderr
    _push(cli, env, tmp_path, 2)  # overwritten: the pointer's pin no longer holds
    again = cli("pull", "--pointer", str(pointer), "--local-dir", str(tmp_path / "q"), env=env)
    assert again.code == 1 and "overwritten since it was pinned" in again.stderr, again.stderr


def test_a_signed_push_into_a_bucket_verifies_on_pull_and_latest(cli, env, api, tmp_path):
    from tests.helpers.signing_helpers import make_key

    key = make_key(tmp_path)
    src = write_checkpoint(tmp_path / "src", {"model.safetensors": os.urandom(20_000), "config.json": b"{}"})
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--step", "1", "--signing-key", str(key.private),
              "--json", env=env)
    assert run.code == 0, run.stderr
    found = cli("latest", "--repo", URI, "--verify-key", str(key.public), "--json", env=env)
    assert found.code == 0 and found.json.get("revision") == run.json["revision"], (found.stdout, found.stderr)
    got = cli("pull", "--repo", URI, "--latest", "--verify-key", str(key.public), "--local-dir", str(tmp_path / "p"),
              "--json", env=env)
    assert got.code == 0 and got.json["signature_verified"] is True, got.stderr
    other = make_key(tmp_path, "other")
    bad = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--verify-key", str(other.public),
              "--local-dir", str(tmp_path / "q"), env=env)
    assert bad.code != 0 and not (tmp_path / "q").exists()


def test_a_re_pull_from_a_bucket_reuses_the_dir_and_include_takes_a_part(cli, env, tmp_path):
    pushed, files = _push(cli, env, tmp_path, 3)
    dest = tmp_path / "p"
    args = ["pull", "--repo", URI, "--subfolder", "checkpoint-3", "--revision", pushed["revision"], "--local-dir",
            str(dest), "--json"]
    first = cli(*args, env=env)
    assert first.code == 0 and first.json["downloaded_files"] == 2, first.stderr
    again = cli(*args, env=env)
    assert again.code == 0 and again.json["downloaded_files"] == 0 and again.json["reused_files"] == 2, again.stderr
    from ckpt_action.api import pulled_checkpoint

    assert pulled_checkpoint(dest) == (URI, "checkpoint-3", pushed["revision"])  # what a resumed Trainer records
    part = cli("pull", "--repo", URI, "--subfolder", "checkpoint-3", "--include", "config.json", "--local-dir",
               str(tmp_path / "part"), "--json", env=env)
    assert part.code == 0 and part.json["partial"] is True, part.stderr
    got = read_tree(tmp_path / "part")
    got.pop(MANIFEST, None)
    assert got == {"config.json": files["config.json"]}


def test_a_file_above_the_hash_ahead_limit_is_hashed_by_the_upload_and_pulled_verified(cli, env, tmp_path):
    """Files over 20 MiB are hashed while they are uploaded (the push hands the store its own
    open file, /proc/self/fd/N): the bucket's upload hashes that very file."""
    from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT

    files = {"model.safetensors": os.urandom(GIT_OID_LIMIT + 1), "config.json": b"{}"}
    pushed, _files = _push(cli, env, tmp_path, 9, files=files)
    got = cli("pull", "--repo", URI, "--subfolder", "checkpoint-9", "--revision", pushed["revision"],
              "--local-dir", str(tmp_path / "p"), env=env)
    assert got.code == 0, got.stderr
    assert (tmp_path / "p" / "model.safetensors").read_bytes() == files["model.safetensors"]


def _push_metric(cli, env, tmp_path, step, *metrics, repo=URI):
    src = write_checkpoint(tmp_path / f"m-{step}", {"model.bin": bytes([step % 256]) * 64, "config.json": b"{}"})
    args = ["push", "--repo", repo, "--local-dir", str(src), "--step", str(step), "--json"]
    for m in metrics:
        args += ["--metric", m]
    run = cli(*args, env=env)
    assert run.code == 0, run.stderr
    return run.json


def test_retention_on_a_bucket_keeps_the_union_and_says_why(cli, env, api, tmp_path):
    for step, loss in [(100, "0.2"), (200, "0.9"), (300, None), (400, "0.8"), (500, "0.7"), (600, "0.6")]:
        _push_metric(cli, env, tmp_path, step, *([f"eval_loss={loss}"] if loss else []))
    args = ["prune", "--repo", URI, "--keep-last", "2", "--keep-every", "200", "--keep-best", "eval_loss:min",
            "--json"]
    dry = cli(*args, "--dry-run", env=env)
    assert dry.code == 0, dry.stderr
    assert sorted(dry.json["deleted"]) == ["checkpoint-300"], dry.json
    reasons = {r["subfolder"]: r["reason"] for r in dry.json["kept_reasons"]}
    assert "eval_loss" in reasons["checkpoint-100"] and "200" in reasons["checkpoint-400"], reasons
    assert _paths(api, "checkpoint-300"), "a dry run deletes nothing"
    run = cli(*args, env=env)
    assert run.code == 0 and run.json["deleted"] == ["checkpoint-300"], run.stdout + run.stderr
    assert not _paths(api, "checkpoint-300") and _paths(api, "checkpoint-100")
    none = cli("prune", "--repo", URI, "--keep-best", "bleu:max", env=env)
    assert none.code == 2 and "--keep-best" in none.stderr, none.stderr
    assert _paths(api, "checkpoint-200"), "nothing deleted on a metric no checkpoint has"


def test_latest_and_promote_best_on_a_bucket(cli, env, api, tmp_path):
    _push_metric(cli, env, tmp_path, 1, "eval_loss=0.9")
    chosen = _push_metric(cli, env, tmp_path, 2, "eval_loss=0.2")
    _push_metric(cli, env, tmp_path, 3)
    best = cli("latest", "--repo", URI, "--best", "eval_loss:min", "--json", env=env)
    assert best.code == 0, best.stderr
    assert best.json["subfolder"] == "checkpoint-2" and best.json["revision"] == chosen["revision"]
    assert best.json["best_metric"] == "eval_loss" and best.json["best_value"] == 0.2
    run = cli("promote", "--repo", URI, "--best", "eval_loss:min", "--to", "release", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["source_subfolder"] == "checkpoint-2" and run.json["best_value"] == 0.2
    listed = {r["subfolder"]: r for r in cli("list", "--repo", URI, "--json", env=env).json["checkpoints"]}
    assert listed["release"]["metrics"] == {"eval_loss": 0.2}


def test_card_on_a_bucket_is_refused_before_anything_is_sent(cli, env, api, hub, tmp_path):
    _push_metric(cli, env, tmp_path, 1, "eval_loss=0.5")
    _push_metric(cli, env, tmp_path, 2, "eval_loss=0.4")
    before, start = _paths(api), len(hub.log_entries())
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w"})
    for args in (["push", "--local-dir", str(src), "--step", "3"], ["prune", "--keep-last", "1"],
                 ["promote", "--subfolder", "checkpoint-2", "--to", "release"]):
        run = cli(*args, "--repo", URI, "--card", env=env)
        last = run.stderr.strip().splitlines()[-1]
        assert run.code == 2 and "--card" in last and "--to-repo" in last, (args, run.stderr)
    assert _paths(api) == before
    assert [e for e in hub.log_entries()[start:] if e["method"] != "GET"] == []


def test_the_release_pipeline_from_a_bucket_writes_the_model_repos_card(cli, env, api, tmp_path):
    from huggingface_hub import CommitOperationAdd

    for step, loss in [(1, "0.9"), (2, "0.2"), (3, "0.5"), (4, "0.6")]:
        _push_metric(cli, env, tmp_path, step, f"eval_loss={loss}")
    pruned = cli("prune", "--repo", URI, "--keep-last", "2", "--keep-best", "eval_loss:min", "--json", env=env)
    assert pruned.code == 0 and pruned.json["deleted"] == ["checkpoint-1"], pruned.stdout + pruned.stderr
    api.create_repo("local-user/model", private=True)
    hand = b"# Model\n\nwritten by hand\n"
    api.create_commit("local-user/model", [CommitOperationAdd("README.md", hand)], commit_message="card")
    run = cli("promote", "--repo", URI, "--best", "eval_loss:min", "--to-repo", "local-user/model", "--to", "release",
              "--tag", "v1", "--card", "--json", env=env)
    assert run.code == 0 and run.json["commits"] == 1, run.stderr
    card = open(api.hf_hub_download("local-user/model", "README.md", revision="v1",
                                    cache_dir=str(tmp_path / "dl")), "rb").read()
    assert card.startswith(hand), card
    row = next(line for line in card.decode().splitlines() if line.startswith("| release |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["2", "this commit", "eval&#95;loss=0.2"] and cells[6] == "v1", cells


def test_the_job_summary_of_a_bucket_shows_the_cards_table(cli, env, api, tmp_path):
    _push_metric(cli, env, tmp_path, 1, "eval_loss=0.5")
    _push_metric(cli, env, tmp_path, 2, "eval_loss=0.4")
    summary = tmp_path / "summary.md"
    senv = {**env, "GITHUB_STEP_SUMMARY": str(summary)}
    for args in (["list"], ["prune", "--keep-last", "1"], ["promote", "--best", "eval_loss:min", "--to", "release"]):
        summary.write_text("")
        run = cli(*args, "--repo", URI, env=senv)
        assert run.code == 0, (args, run.stderr)
        text = summary.read_text()
        assert "| checkpoint | step | pinned SHA | metrics | complete | signed | tags |" in text, (args, text)
        assert "| checkpoint-2 | 2 |" in text, (args, text)


def test_a_folder_changed_by_another_writer_after_the_push_published_it_is_reported_as_a_race(
        cli, env, api, monkeypatch, tmp_path):
    """Another writer replaces a file right after this push's manifest landed (and was checked):
    the push's proof sees it and says another writer changed the folder, never that the Hub
    did not store the files as uploaded (issue 40)."""
    from ckpt_action.stores.bucket import BucketStore

    real = BucketStore._publish

    def publish(self, wanted, manifests, what):
        pin = real(self, wanted, manifests, what)
        api.batch_bucket_files(BUCKET, add=[(b'{"x": 2}', "checkpoint-1/config.json")])  # the other writer
        return pin

    monkeypatch.setattr(BucketStore, "_publish", publish)
    src = write_checkpoint(tmp_path / "src", {"model.safetensors": os.urandom(50_000), "config.json": b'{"x": 1}'})
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--step", "1", env=env)
    assert run.code == 1, run.stderr
    assert "another writer changed it after this push published it" in run.stderr, run.stderr
    assert "config.json differs" in run.stderr and "the Hub did not store" not in run.stderr
    found = cli("latest", "--repo", URI, "--json", env=env)  # the verdict: its manifest no longer vouches for it
    assert found.code == 0 and found.json["found"] is False, found.stdout


def test_promote_within_a_bucket_named_through_me_copies_like_any_other(cli, env, api, tmp_path):
    """``hf://buckets/me/NAME`` (the caller's own namespace) works for promote as for push,
    latest and pull: the copies name their source bucket as the Hub knows it (issue 40: 422)."""
    mine = "hf://buckets/me/ckpts"
    _pushed, files = _push(cli, env, tmp_path, 4, repo=mine)
    assert cli("latest", "--repo", mine, "--require", env=env).code == 0
    run = cli("promote", "--repo", mine, "--subfolder", "checkpoint-4", "--to", "release", "--json", env=env)
    assert run.code == 0, run.stderr
    got = cli("pull", "--repo", mine, "--subfolder", "release", "--revision", run.json["revision"],
              "--local-dir", str(tmp_path / "rel"), env=env)
    assert got.code == 0, got.stderr
    tree = read_tree(tmp_path / "rel")
    tree.pop(MANIFEST)
    assert tree == files


def test_the_hubs_reason_for_a_refused_batch_is_shown_whole(cli, env, api, monkeypatch, tmp_path):
    """Another writer deletes the files a promote is about to copy: the Hub refuses the batch
    (422) naming each path and why, and the error shows all of it, on one line, not only the
    first line of the client's message."""
    from ckpt_action.stores.bucket import BucketStore

    pushed, _files = _push(cli, env, tmp_path, 4)
    real = BucketStore._copies

    def copies(self, ops):
        out = real(self, ops)
        if out:
            api.batch_bucket_files(BUCKET, delete=["checkpoint-4/model.safetensors", "checkpoint-4/config.json"])
        return out

    monkeypatch.setattr(BucketStore, "_copies", copies)
    run = cli("promote", "--repo", URI, "--subfolder", "checkpoint-4", "--revision", pushed["revision"],
              "--to", "release", env=env)
    assert run.code == 1, run.stderr
    line = run.stderr.strip()
    assert len(line.splitlines()) == 1, run.stderr
    assert "422" in line and "release/model.safetensors" in line and "release/config.json" in line, line
    assert line.count("not found in Xet storage") == 2, line
