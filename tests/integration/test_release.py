"""promote, list and prune through the real CLI against the local Hub."""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_env, read_tree, write_checkpoint

BIG = 3_000_000  # above the LFS threshold, so copies must be server-side


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url)


def api(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def push(cli, env, tmp_path, step, files=None, repo="o/r", subfolder=None):
    files = files or {"model.safetensors": bytes([step % 256]) * BIG + b"x" * step, "config.json": b'{"a": 1}'}
    src = write_checkpoint(tmp_path / f"src-{step}-{subfolder}", files)
    args = ["push", "--repo", repo, "--local-dir", str(src), "--json"]
    args += ["--subfolder", subfolder] if subfolder else ["--step", str(step)]
    run = cli(*args, env=env)
    assert run.code == 0, run.stderr
    return run.json, files


def lfs_bytes_uploaded(entries):
    return sum(e["bytes_in"] for e in entries if e["method"] == "PUT")


def test_promote_copies_server_side_and_is_exact(hub, env, cli, tmp_path):
    out, files = push(cli, env, tmp_path, 900)
    start = len(hub.log_entries())
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-900", "--to", "release", "--json", env=env)
    assert run.code == 0, run.stderr
    res = run.json
    assert res["subfolder"] == "release" and res["source_revision"] == out["revision"] and res["commits"] == 1
    assert res["step"] == 900 and res["revision"] != out["revision"]
    entries = hub.log_entries()[start:]
    assert lfs_bytes_uploaded(entries) == 0, "promote must not upload LFS bytes"
    # Re-uploading a pulled copy would send no LFS bytes either (the Hub has them): count the way down too.
    downloaded = sum(e["bytes_out"] for e in entries if e["method"] == "GET" and "/resolve/" in e["path"])
    assert downloaded < BIG // 100, f"promote downloaded {downloaded} bytes: it must copy on the server"
    assert [e for e in entries if "/commit/" in e["path"]] and len(
        [e for e in entries if e["method"] == "POST" and "/commit/" in e["path"]]) == 1
    dest = tmp_path / "rel"
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "release", "--revision", res["revision"],
                 "--local-dir", str(dest), "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    manifest = json.loads(got.pop("ckpt-manifest.json"))
    assert got == files
    assert manifest["source"] == {"repo": "o/r", "subfolder": "checkpoint-900", "revision": out["revision"]}


def test_promote_is_idempotent_and_target_ends_equal(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 1, files={"a.bin": b"a" * BIG, "old.txt": b"old"}, subfolder="release")
    push(cli, env, tmp_path, 2)
    first = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", "--json", env=env)
    assert first.code == 0, first.stderr
    files = set(api(hub).list_repo_files("o/r", revision=first.json["revision"]))
    assert not {"release/a.bin", "release/old.txt"} & files, "stale target files must go"
    commits_before = len(api(hub).list_repo_commits("o/r"))
    again = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", "--json", env=env)
    assert again.code == 0, again.stderr
    assert again.json["commits"] == 0 and again.json["revision"] == first.json["revision"]
    assert len(api(hub).list_repo_commits("o/r")) == commits_before


def test_promote_with_tag_refuses_to_move_an_existing_tag(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 10)
    push(cli, env, tmp_path, 20)
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-10", "--to", "release", "--tag", "v1.0",
              "--json", env=env)
    assert run.code == 0, run.stderr
    tags = {t.name: t.target_commit for t in api(hub).list_repo_refs("o/r").tags}
    assert tags["v1.0"] == run.json["revision"]
    # Same promotion, same tag: a no-op.
    same = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-10", "--to", "release", "--tag", "v1.0",
               "--json", env=env)
    assert same.code == 0 and same.json["revision"] == run.json["revision"] and same.json["commits"] == 0
    # Another checkpoint under the same tag: refused, nothing committed.
    commits = len(api(hub).list_repo_commits("o/r"))
    clash = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-20", "--to", "release", "--tag", "v1.0",
                env=env)
    assert clash.code == 1
    assert clash.stderr.strip().splitlines()[-1].startswith("error: tag v1.0 already points")
    assert len(api(hub).list_repo_commits("o/r")) == commits
    assert {t.name: t.target_commit for t in api(hub).list_repo_refs("o/r").tags}["v1.0"] == run.json["revision"]


def test_promote_to_a_branch(hub, env, cli, tmp_path):
    out, _files = push(cli, env, tmp_path, 5)
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-5", "--to", "release", "--branch", "stable",
              "--json", env=env)
    assert run.code == 0, run.stderr
    branches = {b.name: b.target_commit for b in api(hub).list_repo_refs("o/r").branches}
    assert branches["stable"] == run.json["revision"]
    assert branches["main"] == out["revision"], "main is untouched by a promotion to another branch"


def test_promote_into_another_repo_streams_with_verification(hub, env, cli, tmp_path):
    out, files = push(cli, env, tmp_path, 7, repo="o/private-train")
    run = cli("promote", "--repo", "o/private-train", "--subfolder", "checkpoint-7", "--to", "release",
              "--to-repo", "o/public-release", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["repo"] == "o/public-release" and run.json["source_revision"] == out["revision"]
    dest = tmp_path / "d"
    assert cli("pull", "--repo", "o/public-release", "--subfolder", "release", "--local-dir", str(dest),
               env=env).code == 0
    got = read_tree(dest)
    manifest = json.loads(got.pop("ckpt-manifest.json"))
    assert got == files and manifest["source"]["repo"] == "o/private-train"


def test_promote_with_a_tag_into_a_repo_that_does_not_exist_yet_creates_it_private_and_tags(hub, env, cli, tmp_path):
    """As without --tag (and as push does): the bucket guide's release step, into a new model repo."""
    _out, files = push(cli, env, tmp_path, 8, repo="o/train", files={"model.safetensors": b"w" * 1000})
    run = cli("promote", "--repo", "o/train", "--subfolder", "checkpoint-8", "--to", "release",
              "--to-repo", "o/new-release", "--tag", "v1", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["repo"] == "o/new-release" and run.json["tag"] == "v1"
    tags = {t.name: t.target_commit for t in api(hub).list_repo_refs("o/new-release").tags}
    assert tags == {"v1": run.json["revision"]}
    assert api(hub).repo_info("o/new-release").private is True
    dest = tmp_path / "d"
    assert cli("pull", "--repo", "o/new-release", "--subfolder", "release", "--revision", "v1",
               "--local-dir", str(dest), env=env).code == 0
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == files


def test_promote_refuses_an_incomplete_checkpoint(hub, env, cli, tmp_path):
    api(hub).create_repo("o/r")
    api(hub).upload_file(path_or_fileobj=b'{"format": "ckpt-action/manifest/v1", "complete": false, "files": {}}',
                         path_in_repo="checkpoint-3/ckpt-manifest.json", repo_id="o/r")
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-3", "--to", "release", env=env)
    assert run.code == 1 and "not a complete checkpoint" in run.stderr


def test_list_shows_complete_partial_and_foreign(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 100)
    push(cli, env, tmp_path, 200, files={"w.bin": b"w" * 10}, subfolder="sft")
    a = api(hub)
    a.upload_folder(folder_path=str(write_checkpoint(tmp_path / "foreign", {"pytorch_model.bin": b"f" * 500,
                                                                            "config.json": b"{}"})),
                    path_in_repo="checkpoint-300", repo_id="o/r")
    a.upload_file(path_or_fileobj=b'{"format": "ckpt-action/manifest/v1", "complete": false, "step": 400, '
                                  b'"files": {"x.bin": {"size": 1, "sha256": "' + b"0" * 64 + b'"}}}',
                  path_in_repo="checkpoint-400/ckpt-manifest.json", repo_id="o/r")
    run = cli("list", "--repo", "o/r", "--json", env=env)
    assert run.code == 0, run.stderr
    rows = {r["subfolder"]: r for r in run.json["checkpoints"]}
    head = a.list_repo_refs("o/r").branches[0].target_commit
    assert run.json["revision"] == head and all(r["revision"] == head for r in rows.values())
    assert rows["checkpoint-100"]["status"] == "complete" and rows["checkpoint-100"]["files"] == 2
    assert rows["checkpoint-100"]["size"] == BIG + 100 + len(b'{"a": 1}')
    # No manifest, beside checkpoints that have one: a push cut short, not another tool's checkpoint.
    assert rows["checkpoint-300"]["status"] == "foreign" and rows["checkpoint-300"]["complete"] is False
    assert rows["checkpoint-300"]["problem"].startswith("it has no manifest, and other checkpoint-N folders")
    assert rows["checkpoint-400"]["status"] == "incomplete" and rows["checkpoint-400"]["complete"] is False
    assert rows["sft"]["status"] == "complete" and rows["sft"]["step"] is None
    assert run.json["subfolder"] == "checkpoint-100", "the newest complete checkpoint-N"
    table = cli("list", "--repo", "o/r", env=env)
    assert table.code == 0 and "checkpoint-400" in table.stdout and "incomplete" in table.stdout
    summary = tmp_path / "summary.md"
    env2 = dict(env, GITHUB_STEP_SUMMARY=str(summary))
    assert cli("list", "--repo", "o/r", env=env2).code == 0
    # The model card's table: complete yes/no, pinned to the SHA read.
    lines = summary.read_text().splitlines()
    assert any(x.startswith(f"| checkpoint-100 | 100 | `{run.json['revision'][:12]}` |") and "| yes |" in x
               for x in lines), lines
    assert any(x.startswith("| checkpoint-400 | 400 |") and "| no |" in x for x in lines), lines


def test_prune_keeps_exactly_what_it_promised_in_one_commit(hub, env, cli, tmp_path):
    small = {"w.bin": b"w" * 100}
    shas = {}
    for step in (1, 2, 3, 4, 5, 6):
        shas[step] = push(cli, env, tmp_path, step, files=small | {"s.txt": str(step).encode()})[0]["revision"]
    push(cli, env, tmp_path, 0, files=small, subfolder="sft")
    a = api(hub)
    # checkpoint-3 was tagged right after its push, checkpoint-2 is promoted to release,
    # checkpoint-6 is a push that never finished.
    a.create_tag("o/r", tag="step-3", revision=shas[3])
    assert cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", env=env).code == 0
    a.upload_file(path_or_fileobj=b'{"format": "ckpt-action/manifest/v1", "complete": false, "files": {}}',
                  path_in_repo="checkpoint-6/ckpt-manifest.json", repo_id="o/r")
    commits = len(a.list_repo_commits("o/r"))

    dry = cli("prune", "--repo", "o/r", "--keep-last", "1", "--dry-run", "--json", env=env)
    assert dry.code == 0, dry.stderr
    assert dry.json["dry_run"] is True and sorted(dry.json["deleted"]) == ["checkpoint-1", "checkpoint-4"]
    assert len(a.list_repo_commits("o/r")) == commits, "a dry run changes nothing"

    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=env)
    assert run.code == 0, run.stderr
    assert sorted(run.json["deleted"]) == ["checkpoint-1", "checkpoint-4"]
    # 6: the last one; 5: the latest complete; 3: tagged; 2: promoted.
    assert sorted(run.json["kept"]) == ["checkpoint-2", "checkpoint-3", "checkpoint-5", "checkpoint-6"]
    assert len(a.list_repo_commits("o/r")) == commits + 1, "one commit"
    left = {f.split("/")[0] for f in a.list_repo_files("o/r")}
    assert {"sft", "release", "checkpoint-2", "checkpoint-3", "checkpoint-5", "checkpoint-6"} <= left
    assert not {"checkpoint-1", "checkpoint-4"} & left
    assert cli("latest", "--repo", "o/r", "--json", env=env).json["subfolder"] == "checkpoint-5"
    again = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=env)
    assert again.code == 0 and again.json["deleted"] == [] and len(a.list_repo_commits("o/r")) == commits + 1


def test_promote_a_folder_without_manifest_then_pull_it(hub, env, cli, tmp_path):
    files = {"pytorch_model.bin": b"f" * 5000, "config.json": b'{"from": "trainer"}'}
    api(hub).create_repo("o/r")
    api(hub).upload_folder(folder_path=str(write_checkpoint(tmp_path / "t", files)), path_in_repo="checkpoint-9",
                           repo_id="o/r")
    first = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-9", "--to", "release", "--tag", "v9",
                "--json", env=env)
    assert first.code == 0, first.stderr
    again = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-9", "--to", "release", "--tag", "v9",
                "--json", env=env)
    assert again.code == 0 and again.json["commits"] == 0, again.stderr
    dest = tmp_path / "d"
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "release", "--revision", "v9", "--local-dir", str(dest),
                 "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    manifest = json.loads(got.pop("ckpt-manifest.json"))
    assert got == files and manifest["files"]["config.json"]["sha256"] is None  # vouched for by git id
