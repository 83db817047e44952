"""The local Hub's repo, commit, tree and ref endpoints, driven by the real huggingface_hub client
and ``hf`` CLI over HTTP, including the places where it used to differ from the Hub."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    CommitScheduler,
    HfApi,
    RepoFile,
    RepoFolder,
    hf_hub_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ckpt_action.checkpoint.manifest import predict_lfs
from tests.conftest import write_checkpoint
from tests.helpers.localhub_fixtures import REPO, TOKEN, entries

HF = str(Path(sys.executable).with_name("hf"))  # the client next to this interpreter, not whatever is on PATH

# ---------------------------------------------------------------- repos, commits, trees


def test_create_repo_keeps_private_flag(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    url = api.create_repo("local-user/secret", private=True)
    assert url.repo_id == "local-user/secret"
    api.create_repo("local-user/open")
    assert api.repo_info("local-user/secret").private is True
    info = api.repo_info("local-user/open")
    assert info.private is False and info.id == "local-user/open" and len(info.sha or "") == 40
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_repo("local-user/open")
    assert exc.value.response.status_code == 409
    api.create_repo("local-user/open", exist_ok=True)
    api.update_repo_settings("local-user/open", private=True)
    assert api.repo_info("local-user/open").private is True
    api.delete_repo("local-user/open")
    assert not api.repo_exists("local-user/open")


def test_upload_folder_with_delete_patterns(local_hub, tmp_path):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    first = write_checkpoint(tmp_path / "one", {"a.txt": b"a", "ckpt/x.bin": os.urandom(100),
                                            "ckpt/y.bin": os.urandom(100)})
    api.upload_folder(folder_path=first, repo_id=REPO)
    assert set(api.list_repo_files(REPO)) == {".gitattributes", "a.txt", "ckpt/x.bin", "ckpt/y.bin"}
    second = write_checkpoint(tmp_path / "two", {"ckpt/z.bin": os.urandom(100), "b.txt": b"b"})
    info = api.upload_folder(folder_path=second, repo_id=REPO, delete_patterns=["ckpt/*"])
    assert set(api.list_repo_files(REPO)) == {".gitattributes", "a.txt", "b.txt", "ckpt/z.bin"}
    assert api.repo_info(REPO).sha == info.oid
    # Unchanged files are skipped by the client thanks to the preupload oids.
    again = api.upload_folder(folder_path=second, repo_id=REPO)
    assert again.oid == info.oid


def test_copy_lfs_and_regular_sources(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    big = os.urandom(20000)
    api.create_commit(REPO, [CommitOperationAdd("w.safetensors", big), CommitOperationAdd("c.json", b"{}")],
                      commit_message="add")
    puts_before = len(entries(local_hub, "PUT"))
    api.create_commit(REPO, [CommitOperationCopy("w.safetensors", "copy/w.safetensors"),
                             CommitOperationCopy("c.json", "copy/c.json")], commit_message="copy")
    assert len(entries(local_hub, "PUT")) == puts_before  # an LFS copy re-uses the stored object
    info = {f.path: f for f in api.get_paths_info(REPO, ["w.safetensors", "copy/w.safetensors", "copy/c.json"])
            if isinstance(f, RepoFile)}
    copied, original = info["copy/w.safetensors"].lfs, info["w.safetensors"].lfs
    assert copied is not None and original is not None and copied.sha256 == original.sha256
    assert info["copy/c.json"].lfs is None
    path = hf_hub_download(REPO, "copy/w.safetensors", endpoint=local_hub.url, token=TOKEN, cache_dir=hf_client)
    assert Path(path).read_bytes() == big


def test_stale_parent_is_412_with_the_hubs_words(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    head = api.repo_info(REPO).sha
    assert head is not None
    new = api.create_commit(REPO, [CommitOperationAdd("a", b"1")], commit_message="one", parent_commit=head)
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_commit(REPO, [CommitOperationAdd("b", b"2")], commit_message="two", parent_commit=head)
    assert exc.value.response.status_code == 412
    assert "The branch was updated since you opened this page. Please refresh and try again." in str(exc.value)
    assert api.repo_info(REPO).sha == new.oid
    # A parent given by its first 7 characters, as the client's docs allow.
    api.create_commit(REPO, [CommitOperationAdd("c", b"3")], commit_message="three", parent_commit=new.oid[:7])


def test_delete_missing_file_is_entry_not_found(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    with pytest.raises(EntryNotFoundError):
        api.create_commit(REPO, [CommitOperationDelete("nope.txt")], commit_message="del")
    api.create_commit(REPO, [CommitOperationAdd("d/a", b"1"), CommitOperationAdd("d/b", b"2")], commit_message="x")
    api.create_commit(REPO, [CommitOperationDelete("d/")], commit_message="rm folder")
    assert api.list_repo_files(REPO) == [".gitattributes"]


def test_a_path_that_leaves_the_repo_is_422(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    with pytest.raises(HfHubHTTPError) as exc:
        api.upload_file(path_or_fileobj=b"content", path_in_repo="..\\ddd", repo_id=REPO)
    assert exc.value.response.status_code == 422


def test_tree_listing_and_paths_info(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.create_commit(REPO, [CommitOperationAdd("ckpt/1/w.bin", os.urandom(64)),
                             CommitOperationAdd("ckpt/1/meta.json", b"{}"),
                             CommitOperationAdd("top.txt", b"top")], commit_message="1")
    top = {e.path: e for e in api.list_repo_tree(REPO)}
    assert set(top) == {".gitattributes", "ckpt", "top.txt"}
    folder = top["ckpt"]
    assert isinstance(folder, RepoFolder)
    tree_before = folder.tree_id
    deep = {e.path for e in api.list_repo_tree(REPO, recursive=True)}
    assert {"ckpt", "ckpt/1", "ckpt/1/w.bin", "ckpt/1/meta.json"} <= deep
    sub = {e.path for e in api.list_repo_tree(REPO, path_in_repo="ckpt/1")}
    assert sub == {"ckpt/1/w.bin", "ckpt/1/meta.json"}
    expanded = list(api.list_repo_tree(REPO, path_in_repo="ckpt/1", expand=True))
    assert all(e.last_commit is not None and e.last_commit.title == "1" for e in expanded)
    # Unchanged subtrees keep their oid: commits share them.
    api.create_commit(REPO, [CommitOperationAdd("other.txt", b"o")], commit_message="2")
    assert [e.tree_id for e in api.list_repo_tree(REPO) if isinstance(e, RepoFolder)] == [tree_before]
    info = api.get_paths_info(REPO, ["ckpt/1/w.bin", "ckpt", "missing"])
    kinds = {type(i).__name__: i.path for i in info}
    assert kinds == {"RepoFile": "ckpt/1/w.bin", "RepoFolder": "ckpt"}
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="missing"))


def test_tree_pagination_over_1000_entries(hub_server, hf_client):
    server = hub_server()
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    ops = [CommitOperationAdd(f"many/f{i:05d}.txt", str(i).encode()) for i in range(2100)]
    api.create_commit(REPO, ops, commit_message="many")
    before = len(entries(server, "GET", "/tree/"))
    listed = [e.path for e in api.list_repo_tree(REPO, path_in_repo="many")]
    assert len(listed) == 2100 and len(set(listed)) == 2100
    tree_calls = entries(server, "GET", "/tree/")[before:]
    assert len(tree_calls) == 3 and sum("cursor=" in e["path"] for e in tree_calls) == 2
    assert len(list(api.list_repo_tree(REPO, recursive=True))) == 2100 + 2  # + .gitattributes, many/


def test_refs_tags_branches_and_commit_pages(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    for i in range(55):
        api.create_commit(REPO, [CommitOperationAdd("step.txt", str(i).encode())], commit_message=f"step {i}",
                          commit_description=f"desc {i} <b>")
    commits = api.list_repo_commits(REPO)
    assert len(commits) == 56
    assert commits[0].title == "step 54" and commits[0].message == "desc 54 <b>"
    assert commits[0].authors == ["local-user"]
    assert commits[-1].title == "initial commit" and commits[0].formatted_title is None
    # formatted=True: HTML titles and messages, on every page (the next-page link keeps the query).
    formatted = api.list_repo_commits(REPO, formatted=True)
    assert len(formatted) == 56 and all(c.formatted_title is not None for c in formatted)
    assert formatted[0].formatted_title == "step 54" and formatted[0].formatted_message == "<p>desc 54 &lt;b&gt;</p>"
    head = commits[0].commit_id
    api.create_tag(REPO, tag="v1", revision=commits[5].commit_id)
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_tag(REPO, tag="v1")
    assert exc.value.response.status_code == 409
    api.create_tag(REPO, tag="v1", exist_ok=True)
    api.create_branch(REPO, branch="dev", revision="v1")
    refs = api.list_repo_refs(REPO)
    assert {(b.name, b.ref, b.target_commit) for b in refs.branches} == {
        ("main", "refs/heads/main", head), ("dev", "refs/heads/dev", commits[5].commit_id)}
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", commits[5].commit_id)]
    assert refs.converts == []
    assert api.list_repo_commits(REPO, revision="dev")[0].commit_id == commits[5].commit_id
    # Ref names with a slash travel URL-quoted.
    api.create_branch(REPO, branch="runs/a")
    api.create_commit(REPO, [CommitOperationAdd("only-on-run.txt", b"r")], commit_message="r", revision="runs/a")
    assert "only-on-run.txt" in [e.path for e in api.list_repo_tree(REPO, revision="runs/a")]
    assert "only-on-run.txt" not in api.list_repo_files(REPO)
    api.delete_branch(REPO, branch="runs/a")
    api.delete_tag(REPO, tag="v1")
    api.delete_branch(REPO, branch="dev")
    refs = api.list_repo_refs(REPO)
    assert refs.tags == [] and [b.name for b in refs.branches] == ["main"]


def test_ref_errors_are_the_hubs(local_hub):
    """Texts and order of checks as huggingface_hub's own tests expect them from the Hub."""
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.create_branch(REPO, branch="cool-branch")
    with pytest.raises(HfHubHTTPError, match=r"Reference refs/heads/cool-branch already exists") as exc:
        api.create_branch(REPO, branch="cool-branch")
    assert exc.value.response.status_code == 409
    with pytest.raises(HfHubHTTPError, match=r"Reference refs/heads/main already exists"):
        api.create_branch(REPO, branch="main")
    api.create_branch(REPO, branch="cool-branch", exist_ok=True)
    api.create_tag(REPO, tag="tag")
    api.create_branch(REPO, branch="tag")  # a branch may share a tag's name
    with pytest.raises(HfHubHTTPError, match="Invalid reference for a branch"):
        api.create_branch(REPO, branch="refs/pr/5")
    with pytest.raises(HfHubHTTPError, match="Cannot delete refs/heads/main"):
        api.delete_branch(REPO, branch="main")
    with pytest.raises(HfHubHTTPError, match="Invalid rev id"):
        api.delete_branch(REPO, branch="missing-branch")
    api.create_tag(REPO, tag="cool-tag")
    with pytest.raises(HfHubHTTPError, match="Invalid rev id"):
        api.delete_branch(REPO, branch="cool-tag")  # a tag is not a branch
    # create_tag: a missing revision is a 404 even with an invalid tag name; then the name is a 400.
    with pytest.raises(RevisionNotFoundError):
        api.create_tag(REPO, tag="invalid tag", revision="foobar")
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_tag(REPO, tag="invalid tag")
    assert exc.value.response.status_code == 400
    with pytest.raises(RevisionNotFoundError):
        api.delete_tag(REPO, tag="v0")


def test_every_answer_has_a_request_id_that_errors_quote(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    assert httpx.get(f"{local_hub.url}/api/models/{REPO}").headers["X-Request-Id"].startswith("Root=1-")
    with pytest.raises(RepositoryNotFoundError) as exc:
        api.delete_repo("repo-that-does-not-exist")
    request_id = exc.value.response.headers["X-Request-Id"]
    assert f"(Request ID: {request_id})" in str(exc.value) and "Repository Not Found" in str(exc.value)
    assert entries(local_hub, "DELETE")[-1]["request_id"] == request_id
    assert all(e["request_id"] for e in entries(local_hub))


def test_concurrent_commits_are_serialized(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(8):
                api.create_commit(REPO, [CommitOperationAdd(f"w{n}/{i}", b"x")], commit_message=f"{n}-{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(api.list_repo_commits(REPO)) == 25
    assert len([f for f in api.list_repo_files(REPO) if f.startswith("w")]) == 24


# ---------------------------------------------------------------- repo ids


def test_repo_ids_are_case_insensitive_and_keep_their_spelling(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    assert api.create_repo("Org/Name").repo_id == "Org/Name"
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_repo("org/name")
    assert exc.value.response.status_code == 409
    assert api.create_repo("org/NAME", exist_ok=True).repo_id == "Org/Name"
    api.upload_file(path_or_fileobj=b"\0weights", path_in_repo="w.bin", repo_id="ORG/name")
    assert api.repo_info("org/name").id == "Org/Name"
    assert "w.bin" in api.list_repo_files("oRg/NaMe")
    path = hf_hub_download("org/name", "w.bin", endpoint=local_hub.url, token=TOKEN, cache_dir=hf_client)
    assert Path(path).read_bytes() == b"\0weights"
    api.delete_repo("ORG/NAME")
    assert not api.repo_exists("Org/Name")


def test_ids_without_a_namespace_are_not_found(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    assert api.repo_exists("gpt2") is False
    assert api.file_exists("gpt2", "config.json") is False
    assert api.revision_exists("gpt2", "main") is False
    with pytest.raises(RepositoryNotFoundError):
        list(api.list_repo_tree("gpt2"))
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_refs("gpt2", repo_type="dataset")
    assert httpx.head(f"{local_hub.url}/gpt2/resolve/main/config.json").headers["X-Error-Code"] == "RepoNotFound"


def test_move_repo(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo("local-user/old")
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="local-user/old")
    api.create_repo("local-user/taken")
    with pytest.raises(HfHubHTTPError, match=r"A model repository called local-user/taken already exists"):
        api.move_repo(from_id="local-user/old", to_id="local-user/taken")
    api.move_repo(from_id="local-user/old", to_id="other/New")
    # The old id stays a redirect to the new one, as on the Hub (tests/integration/test_localhub_parity.py).
    assert api.repo_info("local-user/old").id == "other/New"
    assert api.repo_info("other/new").id == "other/New" and "x.txt" in api.list_repo_files("other/New")


def test_list_models_and_hf_repos_ls(hub_server, hub_env, hf_client):
    server = hub_server(token=TOKEN)
    api = HfApi(endpoint=server.url, token=TOKEN)
    for repo, private in (("local-user/ckpt-a", False), ("local-user/ckpt-b", True), ("local-user/other", False),
                          ("team/ckpt-c", False)):
        api.create_repo(repo, private=private)
    api.upload_file(path_or_fileobj=b"\0" * 1000, path_in_repo="w.bin", repo_id="local-user/ckpt-a")
    assert [m.id for m in api.list_models(author="local-user", search="ckpt")] == ["local-user/ckpt-a",
                                                                                   "local-user/ckpt-b"]
    assert [m.id for m in api.list_models(search="CKPT", limit=2)] == ["local-user/ckpt-a", "local-user/ckpt-b"]
    anonymous = HfApi(endpoint=server.url, token=False)
    assert [m.id for m in anonymous.list_models(author="local-user")] == ["local-user/ckpt-a", "local-user/other"]
    assert [m.id for m in api.list_models(author="team")] == ["team/ckpt-c"]
    mine = {r.id: r for r in api.list_user_repos()}
    assert set(mine) == {"local-user/ckpt-a", "local-user/ckpt-b", "local-user/other"}
    assert mine["local-user/ckpt-a"].storage > 1000 and mine["local-user/ckpt-b"].visibility == "private"
    run = subprocess.run([HF, "repos", "ls", "--format", "json"], env=hub_env(server), capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert {r["id"] for r in json.loads(run.stdout)} == set(mine)
    models = subprocess.run([HF, "models", "ls", "--author", "team", "--format", "json"], env=hub_env(server),
                            capture_output=True, text=True, timeout=120)
    assert models.returncode == 0, models.stderr
    assert [m["id"] for m in json.loads(models.stdout)] == ["team/ckpt-c"]


# ---------------------------------------------------------------- history


def test_super_squash_history_and_commit_scheduler(local_hub, tmp_path):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    first = api.upload_file(path_or_fileobj=b"1", path_in_repo="file.txt", repo_id=REPO).oid
    api.upload_file(path_or_fileobj=b"\0lfs", path_in_repo="lfs.bin", repo_id=REPO)
    api.upload_file(path_or_fileobj=b"2", path_in_repo="file.txt", repo_id=REPO)
    files = api.list_repo_files(REPO)
    api.super_squash_history(repo_id=REPO, commit_message="squashed")
    commits = api.list_repo_commits(REPO)
    assert [c.title for c in commits] == ["squashed"] and api.list_repo_files(REPO) == files
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(REPO, revision=first)  # no longer reachable from any ref
    with pytest.raises(RevisionNotFoundError):
        api.super_squash_history(repo_id=REPO, branch="missing")
    api.create_tag(REPO, tag="v1")
    with pytest.raises(HfHubHTTPError) as exc:
        api.super_squash_history(repo_id=REPO, branch="v1")
    assert exc.value.response.status_code == 400
    # CommitScheduler(squash_history=True) pushes, then squashes, on every round.
    folder = write_checkpoint(tmp_path / "watched", {"metrics.jsonl": b'{"step": 1}\n'})
    scheduler = CommitScheduler(repo_id="local-user/scheduled", folder_path=folder, every=10, squash_history=True,
                                hf_api=api)
    try:
        (folder / "metrics.jsonl").write_bytes(b'{"step": 1}\n{"step": 2}\n')
        scheduler.trigger().result()
    finally:
        scheduler.stop()
    assert len(api.list_repo_commits("local-user/scheduled")) == 1
    assert "metrics.jsonl" in api.list_repo_files("local-user/scheduled")


def test_short_commit_shas_resolve_where_the_hub_takes_them(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    one = api.upload_file(path_or_fileobj=b"\0one", path_in_repo="w.bin", repo_id=REPO).oid
    api.upload_file(path_or_fileobj=b"\0two", path_in_repo="w.bin", repo_id=REPO)
    assert api.repo_info(REPO, revision=one[:7]).sha == one  # huggingface_hub issue 197, fixed on the Hub
    api.create_tag(REPO, tag="short", revision=one[:7])
    assert {t.name: t.target_commit for t in api.list_repo_refs(REPO).tags} == {"short": one}
    api.create_branch(REPO, branch="from-short", revision=one[:8])
    assert api.repo_info(REPO, revision="from-short").sha == one
    path = hf_hub_download(REPO, "w.bin", revision=one[:7], endpoint=local_hub.url, token=TOKEN,
                           cache_dir=hf_client)
    assert Path(path).read_bytes() == b"\0one"
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(REPO, revision=one[:6])  # git's shortest abbreviation is 7


# ---------------------------------------------------------------- settings


def test_gated_setting_is_applied(hub_server, hf_client):
    server = hub_server(token=TOKEN)
    owner = HfApi(endpoint=server.url, token=TOKEN)
    owner.create_repo(REPO)
    owner.upload_file(path_or_fileobj=b"\0weights", path_in_repo="w.bin", repo_id=REPO)
    anonymous = HfApi(endpoint=server.url, token=False)
    for gated in ("auto", "manual", False):
        owner.update_repo_settings(REPO, gated=gated)
        assert owner.model_info(REPO).gated == gated
    owner.update_repo_settings(REPO, gated="auto")
    assert anonymous.model_info(REPO).gated == "auto"  # the card is public, the files are not
    with pytest.raises(GatedRepoError):
        hf_hub_download(REPO, "w.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    path = hf_hub_download(REPO, "w.bin", endpoint=server.url, token=TOKEN, cache_dir=hf_client)
    assert Path(path).read_bytes() == b"\0weights"
    refused = httpx.put(f"{server.url}/api/models/{REPO}/settings", json={"gated": "sometimes"},
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 400 and owner.model_info(REPO).gated == "auto"


# ---------------------------------------------------------------- model cards

CARD = b"---\nlicense: apache-2.0\ntags:\n- checkpoints\n---\n# A model\n"


def test_root_readme_commits_are_validated_like_on_the_hub(local_hub, tmp_path):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=CARD, path_in_repo="README.md", repo_id=REPO)
    assert [e["status"] for e in entries(local_hub, "POST", "/api/validate-yaml")] == [200]
    with pytest.warns(UserWarning, match="Warnings while validating metadata in README.md"):
        api.upload_file(path_or_fileobj=b"No metadata here", path_in_repo="README.md", repo_id=REPO)
    head = api.repo_info(REPO).sha
    preuploads = len(entries(local_hub, "POST", "/preupload/"))
    for bad in (b"---\nlicense: [unclosed\n---\ntext\n", b"\n---\nmodel-index: foo\n---\n\ninvalid metadata\n"):
        with pytest.raises(ValueError, match=r"Invalid metadata in README\.md"):
            api.upload_file(path_or_fileobj=bad, path_in_repo="README.md", repo_id=REPO)
    assert api.repo_info(REPO).sha == head  # nothing was committed
    assert len(entries(local_hub, "POST", "/preupload/")) == preuploads  # and nothing was even preuploaded
    card_dir = write_checkpoint(tmp_path / "card", {"README.md": CARD, "weights.bin": b"\0w"})
    api.upload_folder(folder_path=card_dir, repo_id=REPO)
    assert api.list_repo_files(REPO) == [".gitattributes", "README.md", "weights.bin"]


# ---------------------------------------------------------------- .gitattributes and .gitignore


def _lfs_paths(api: HfApi, repo: str) -> set[str]:
    return {f.path for f in api.list_repo_tree(repo, recursive=True) if isinstance(f, RepoFile) and f.lfs}


def test_the_repos_gitattributes_decide_lfs(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.create_commit(REPO, [CommitOperationAdd("a.dat", b"text"), CommitOperationAdd("saved_model/README.txt",
                                                                                        b"text")],
                      commit_message="default attributes")
    assert _lfs_paths(api, REPO) == {"saved_model/README.txt"}
    current = httpx.get(f"{local_hub.url}/{REPO}/resolve/main/.gitattributes").content
    api.upload_file(path_or_fileobj=current + b"*.dat filter=lfs diff=lfs merge=lfs -text\n*.bin -filter\n",
                    path_in_repo=".gitattributes", repo_id=REPO)
    api.create_commit(REPO, [CommitOperationAdd("b.dat", b"text"), CommitOperationAdd("sub/c.dat", b"text"),
                             CommitOperationAdd("w.bin", b"plain text")], commit_message="after")
    assert _lfs_paths(api, REPO) == {"saved_model/README.txt", "b.dat", "sub/c.dat"}
    # A .gitattributes committed together with the files: preupload (made against the old one)
    # says regular, the commit stores them as git's clean filter would, like the Hub.
    api.create_commit(REPO, [CommitOperationAdd(".gitattributes", b"*.txt filter=lfs diff=lfs merge=lfs -text\n"),
                             CommitOperationAdd("notes/n.txt", b"now lfs"), CommitOperationAdd("empty.txt", b"")],
                      commit_message="both")
    lfs = _lfs_paths(api, REPO)
    assert "notes/n.txt" in lfs and "empty.txt" not in lfs
    assert "saved_model/README.txt" in lfs  # unchanged files keep what they were


@pytest.mark.parametrize(("path", "data"), [
    ("model.safetensors", b"text"), ("saved_model/README.txt", b"text"), ("saved_model/a/b.txt", b"t"),
    ("x/saved_model/c.txt", b"t"), ("config.json", b"{}"), ("raw.dat", b"ab\x00cd"),
    ("runs/events.out.tfevents.1", b"t"), ("archive.tar.gz", b"t"), ("empty.bin", b""),
])
def test_ckpt_action_predicts_the_local_hubs_lfs_decision(local_hub, path, data):
    """predict_lfs (the manifest's fast path for latest) and preupload never disagree on a new repo."""
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    answer = httpx.post(f"{local_hub.url}/api/models/{REPO}/preupload/main", headers={"Authorization": "Bearer x"},
                        json={"files": [{"path": path, "size": len(data),
                                         "sample": base64.b64encode(data).decode()}]}).json()
    assert (answer["files"][0]["uploadMode"] == "lfs") is predict_lfs(path, len(data), data)
    api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=REPO)
    assert (path in _lfs_paths(api, REPO)) is predict_lfs(path, len(data), data)


def test_gitignore_in_the_repo_or_the_commit_is_applied(local_hub, tmp_path):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    folder = write_checkpoint(tmp_path / "f", {"temp": b"t", "nested/file.bin": b"\0" * 10, "keep.log": b"k"})
    api.upload_file(path_or_fileobj=b"nested/*\n", path_in_repo=".gitignore", repo_id=REPO)
    api.upload_folder(folder_path=folder, repo_id=REPO)
    assert not api.file_exists(REPO, "nested/file.bin") and api.file_exists(REPO, "temp")
    api.create_repo("local-user/second")
    (folder / ".gitignore").write_text("*.log\n")
    api.upload_folder(folder_path=folder, repo_id="local-user/second")
    files = set(api.list_repo_files("local-user/second"))
    assert "keep.log" not in files and {"temp", "nested/file.bin", ".gitignore"} <= files


# ---------------------------------------------------------------- auth


def test_auth(hub_server, hub_env, hf_client):
    server = hub_server(token=TOKEN)
    owner = HfApi(endpoint=server.url, token=TOKEN)
    owner.create_repo("local-user/pub")
    owner.create_repo("local-user/priv", private=True)
    owner.upload_file(path_or_fileobj=b"data", path_in_repo="f.txt", repo_id="local-user/pub")
    owner.upload_file(path_or_fileobj=b"data", path_in_repo="f.txt", repo_id="local-user/priv")
    assert owner.whoami()["name"] == "local-user"

    wrong = HfApi(endpoint=server.url, token="hf_wrong")
    with pytest.raises(HfHubHTTPError) as exc:
        wrong.repo_info("local-user/pub")
    assert exc.value.response.status_code == 401 and "Invalid credentials" in str(exc.value)
    with pytest.raises(HfHubHTTPError):
        wrong.whoami()

    anon = HfApi(endpoint=server.url, token=False)
    assert anon.repo_info("local-user/pub").id == "local-user/pub"
    path = hf_hub_download("local-user/pub", "f.txt", endpoint=server.url, token=False, cache_dir=hf_client)
    assert Path(path).read_bytes() == b"data"
    with pytest.raises(RepositoryNotFoundError):
        anon.repo_info("local-user/priv")
    for write in (lambda: anon.create_repo("local-user/new"),
                  lambda: anon.upload_file(path_or_fileobj=b"x", path_in_repo="g", repo_id="local-user/pub"),
                  lambda: anon.create_tag("local-user/pub", tag="t")):
        with pytest.raises(HfHubHTTPError) as exc:
            write()
        assert exc.value.response.status_code == 401
    who = subprocess.run([HF, "auth", "whoami"], env=hub_env(server), capture_output=True, text=True)
    assert who.returncode == 0 and "local-user" in who.stdout
    bad = subprocess.run([HF, "auth", "whoami"], env=hub_env(server, token="hf_wrong"),
                         capture_output=True, text=True)
    assert bad.returncode != 0


# ---------------------------------------------------------------- persistence


def test_restart_keeps_everything_and_ignores_torn_temp_files(served, hf_client):
    server, api, weights = served
    api.create_repo("local-user/private", private=True)
    api.create_tag(REPO, tag="keep")
    refs = api.list_repo_refs(REPO)
    torn = server.data_dir / "tmp" / "torn-write"
    torn.write_bytes(b"half a tree obj")
    server.restart()
    api = HfApi(endpoint=server.url, token=False)
    assert api.list_repo_refs(REPO) == refs
    assert api.repo_info("local-user/private").private is True
    path = hf_hub_download(REPO, "model/weights.bin", revision="keep", endpoint=server.url, token=False,
                           cache_dir=hf_client, force_download=True)
    assert Path(path).read_bytes() == weights
    assert not torn.exists()


def test_data_dirs_from_before_case_insensitive_ids_are_moved(tmp_path, hf_client):
    from ckpt_localhub import LocalHub

    with LocalHub(tmp_path / "d") as hub:
        HfApi(endpoint=hub.url, token=TOKEN).create_repo("Org/Mixed")
    repo_dir = tmp_path / "d/repos/models/org/mixed"
    meta = json.loads((repo_dir / "meta.json").read_text())
    old = tmp_path / "d/repos/models/Org/Mixed"  # how the previous layout kept it
    old.parent.mkdir(parents=True)
    repo_dir.rename(old)
    del meta["id"]
    (old / "meta.json").write_text(json.dumps(meta))
    with LocalHub(tmp_path / "d") as hub:
        assert HfApi(endpoint=hub.url, token=TOKEN).repo_info("org/mixed").id == "Org/Mixed"


def test_commit_with_missing_lfs_object_is_refused(served):
    server, api, _ = served
    head = api.repo_info(REPO).sha
    body = "\n".join(json.dumps(line) for line in [
        {"key": "header", "value": {"summary": "bad", "description": ""}},
        {"key": "file", "value": {"path": "ok.txt", "content": base64.b64encode(b"x").decode(),
                                  "encoding": "base64"}},
        {"key": "lfsFile", "value": {"path": "ghost.bin", "algo": "sha256", "oid": "ab" * 32, "size": 10}},
    ])
    r = httpx.post(f"{server.url}/api/models/{REPO}/commit/main", content=body,
                   headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 400 and "never uploaded" in r.json()["error"]
    assert api.repo_info(REPO).sha == head
    copy = body.replace(', "size": 10', "")
    assert httpx.post(f"{server.url}/api/models/{REPO}/commit/main", content=copy).status_code == 400
    assert api.repo_info(REPO).sha == head
    garbage = httpx.post(f"{server.url}/api/models/{REPO}/commit/main", content=b'{"key": "file", "value": 3}\n')
    assert garbage.status_code == 400 and "line 1" in garbage.json()["error"]


def test_pull_requests_are_refused(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    with pytest.raises(HfHubHTTPError) as exc:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO, create_pr=True)
    assert exc.value.response.status_code == 400 and "Pull requests are not supported" in str(exc.value)
