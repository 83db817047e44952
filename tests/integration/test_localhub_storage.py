"""What the local Hub stores for a repo and how a user frees it, through huggingface_hub's own
calls (issue 23, item 4): ``usedStorage`` in repo info, ``super_squash_history`` and the garbage
it leaves, ``list_lfs_files`` and ``permanently_delete_lfs_files`` with both ``rewrite_history``.

Cases ported from huggingface_hub's tests/test_hf_api.py: ``TestSquashHistory.
test_super_squash_history_on_branch`` and ``TestListAndPermanentlyDeleteLFSFiles.
test_list_and_delete_lfs_files`` (``test_super_squash_history_on_special_ref`` needs pull
requests, which the local Hub does not have).
"""

from __future__ import annotations

import hashlib
import os

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RevisionNotFoundError,
)

from tests.helpers.localhub_fixtures import TOKEN

REPO = "local-user/store"


def _used(api: HfApi, repo_id: str = REPO) -> int:
    used = api.model_info(repo_id, expand=["usedStorage"]).used_storage
    assert isinstance(used, int)
    return used


def _lfs_on_disk(hub, sha: str) -> bool:
    return hub.hub.store.objects.lfs_path(sha).exists()


def test_super_squash_history_on_branch(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    repo_id = api.create_repo(REPO).repo_id
    api.upload_file(repo_id=repo_id, path_in_repo="file.txt", path_or_fileobj=b"content")
    api.upload_file(repo_id=repo_id, path_in_repo="lfs.bin", path_or_fileobj=b"content")
    api.upload_file(repo_id=repo_id, path_in_repo="file.txt", path_or_fileobj=b"another_content")
    api.create_branch(repo_id=repo_id, branch="v0.1", exist_ok=True)
    api.upload_file(repo_id=repo_id, path_in_repo="file.txt", path_or_fileobj=b"foo", revision="v0.1")
    api.super_squash_history(repo_id=repo_id)
    squashed_main_commits = api.list_repo_commits(repo_id=repo_id, revision="main")
    branch_commits = api.list_repo_commits(repo_id=repo_id, revision="v0.1")
    assert len(squashed_main_commits) == 1
    assert squashed_main_commits[0].title == "Super-squash branch 'main' using huggingface_hub"
    assert len(branch_commits) == 5
    assert branch_commits[-1].title == "initial commit"
    api.super_squash_history(repo_id=repo_id, branch="v0.1")
    squashed_branch_commits = api.list_repo_commits(repo_id=repo_id, revision="v0.1")
    assert len(squashed_branch_commits) == 1
    assert squashed_branch_commits[0].title == "Super-squash branch 'v0.1' using huggingface_hub"


def test_list_and_delete_lfs_files(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    repo_id = api.create_repo(REPO).repo_id
    api.upload_file(path_or_fileobj=b"LFS content", path_in_repo="lfs_file.bin", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"TXT content", path_in_repo="txt_file.txt", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"LFS content 2", path_in_repo="lfs_file_2.bin", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"TXT content 2", path_in_repo="txt_file_2.txt", repo_id=repo_id)
    api.create_branch(repo_id=repo_id, branch="my-branch")
    api.upload_file(path_or_fileobj=b"LFS content branch", path_in_repo="lfs_file_branch.bin", repo_id=repo_id,
                    revision="my-branch")
    api.upload_file(path_or_fileobj=b"TXT content branch", path_in_repo="txt_file_branch.txt", repo_id=repo_id,
                    revision="my-branch")
    lfs_files = list(api.list_lfs_files(repo_id=repo_id))
    assert len(lfs_files) == 3
    assert {file.filename for file in lfs_files} == {"lfs_file.bin", "lfs_file_2.bin", "lfs_file_branch.bin"}
    by_name = {f.filename: f for f in lfs_files}
    assert by_name["lfs_file.bin"].size == len(b"LFS content")
    assert by_name["lfs_file.bin"].file_oid == hashlib.sha256(b"LFS content").hexdigest()
    lfs_files_on_main = [file for file in lfs_files if file.ref in ("main", "refs/heads/main")]
    assert len(lfs_files_on_main) == 2
    api.permanently_delete_lfs_files(repo_id=repo_id, lfs_files=lfs_files_on_main)
    lfs_files = list(api.list_lfs_files(repo_id=repo_id))
    assert {file.filename for file in lfs_files} == {"lfs_file_branch.bin"}
    # rewrite_history=True (the default): the pointers are gone from main's files.
    assert set(api.list_repo_files(repo_id=repo_id)) == {".gitattributes", "txt_file.txt", "txt_file_2.txt"}
    with pytest.raises(EntryNotFoundError):
        api.hf_hub_download(repo_id, "lfs_file.bin")
    # ...and from the branch, which held them too; its own object stays.
    assert set(api.list_repo_files(repo_id=repo_id, revision="my-branch")) == {
        ".gitattributes", "txt_file.txt", "txt_file_2.txt", "lfs_file_branch.bin", "txt_file_branch.txt"}
    for item in lfs_files_on_main:
        assert not _lfs_on_disk(local_hub, item.file_oid)


def test_used_storage_counts_unique_objects_across_history_and_refs(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    base = _used(api)  # the initial .gitattributes
    a, b = os.urandom(3000), os.urandom(5000)
    api.upload_file(path_or_fileobj=a, path_in_repo="a.bin", repo_id=REPO)
    assert _used(api) == base + 3000
    api.upload_file(path_or_fileobj=a, path_in_repo="copy/a.bin", repo_id=REPO)  # same bytes: stored once
    assert _used(api) == base + 3000
    api.upload_file(path_or_fileobj=b, path_in_repo="b.bin", repo_id=REPO)
    api.create_commit(REPO, [CommitOperationDelete("b.bin")], commit_message="delete b")
    assert _used(api) == base + 8000, "a deleted file still counts: history holds it"
    info = api.model_info(REPO, expand=["usedStorage"])
    assert info.id == REPO and info.used_storage == base + 8000
    assert api.model_info(REPO).used_storage is None  # only when asked for, as on the Hub
    # Another repo holding the same bytes counts them too (the Hub accounts per repo).
    api.create_repo("local-user/other")
    api.upload_file(path_or_fileobj=a, path_in_repo="a.bin", repo_id="local-user/other")
    assert _used(api, "local-user/other") > 3000
    # A squash of main drops what only history held, and the garbage goes from disk.
    api.create_branch(REPO, branch="keep")
    api.upload_file(path_or_fileobj=b"k" * 100, path_in_repo="k.bin", repo_id=REPO, revision="keep")
    api.super_squash_history(repo_id=REPO)
    assert _used(api) == base + 8000 + 100, "the branch still holds b.bin in its history"
    api.delete_branch(REPO, branch="keep")  # what only the branch held is garbage too
    assert _used(api) == base + 3000
    assert not _lfs_on_disk(local_hub, hashlib.sha256(b).hexdigest())
    assert _lfs_on_disk(local_hub, hashlib.sha256(a).hexdigest())


def test_permanent_delete_without_rewriting_history(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    gone, kept = os.urandom(4000), os.urandom(2000)
    old = api.create_commit(REPO, [CommitOperationAdd("ckpt-1/w.bin", gone), CommitOperationAdd("ckpt-1/c.json", b"{}"),
                                   CommitOperationAdd("shared.bin", kept)], commit_message="one").oid
    api.create_tag(REPO, tag="v1", revision=old)
    api.create_commit(REPO, [CommitOperationDelete("ckpt-1/")], commit_message="prune")
    before = _used(api)
    head = api.model_info(REPO).sha
    target = [f for f in api.list_lfs_files(REPO) if f.file_oid == hashlib.sha256(gone).hexdigest()]
    api.permanently_delete_lfs_files(REPO, target, rewrite_history=False)
    # No SHA changes: main, the tag and the old commit keep their ids and their trees.
    assert api.model_info(REPO).sha == head and api.model_info(REPO, revision="v1").sha == old
    assert "ckpt-1/w.bin" in api.list_repo_files(REPO, revision=old)
    assert _used(api) == before - 4000
    assert {f.filename for f in api.list_lfs_files(REPO)} == {"shared.bin"}
    assert not _lfs_on_disk(local_hub, target[0].file_oid)
    # The deleted object's file at the old commit answers 410 Gone, saying why; the rest still downloads.
    url = f"{local_hub.url}/{REPO}/resolve/{old}/ckpt-1/w.bin"
    answer = httpx.head(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 410 and "permanently deleted" in answer.headers["X-Error-Message"]
    with pytest.raises(LocalEntryNotFoundError) as exc:  # the client's words for a HEAD that failed
        hf_hub_download(REPO, "ckpt-1/w.bin", revision=old, endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)
    cause = exc.value.__cause__
    assert isinstance(cause, HfHubHTTPError) and cause.response.status_code == 410
    for name, data in (("ckpt-1/c.json", b"{}"), ("shared.bin", kept)):
        got = hf_hub_download(REPO, name, revision=old, endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)
        assert open(got, "rb").read() == data
    # Pushing the same bytes again brings the object back, for every commit that names it.
    api.upload_file(path_or_fileobj=gone, path_in_repo="again.bin", repo_id=REPO)
    assert httpx.head(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code in (200, 302)


def test_rewrite_history_changes_the_shas_of_commits_that_held_a_deleted_object(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    first = api.upload_file(path_or_fileobj=b"x" * 10, path_in_repo="x.txt", repo_id=REPO).oid
    holder = api.upload_file(path_or_fileobj=os.urandom(1000), path_in_repo="w.bin", repo_id=REPO).oid
    api.create_tag(REPO, tag="v1", revision=holder)
    api.permanently_delete_lfs_files(REPO, list(api.list_lfs_files(REPO)))
    commits = [c.commit_id for c in api.list_repo_commits(REPO)]
    assert first in commits, "a commit before the object keeps its SHA"
    assert holder not in commits and len(commits) == 3
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision=holder)
    tag_sha = api.model_info(REPO, revision="v1").sha
    assert tag_sha == commits[0] and "w.bin" not in api.list_repo_files(REPO, revision="v1")


def test_storage_calls_need_the_owner(hub_server, hf_client):
    server = hub_server(token=TOKEN)
    HfApi(endpoint=server.url, token=TOKEN).create_repo(REPO)
    anonymous = HfApi(endpoint=server.url, token=False)
    with pytest.raises(HfHubHTTPError) as exc:
        list(anonymous.list_lfs_files(REPO))
    assert exc.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError):
        anonymous.permanently_delete_lfs_files(REPO, list(HfApi(endpoint=server.url, token=TOKEN).list_lfs_files(
            REPO)) or [_fake_lfs()])
    bad = httpx.post(f"{server.url}/api/models/{REPO}/lfs-files/batch", headers={"Authorization": f"Bearer {TOKEN}"},
                     json={"deletions": {"sha": ["../x"], "rewriteHistory": False}})
    assert bad.status_code == 400


def _fake_lfs():
    from huggingface_hub.hf_api import LFSFileInfo

    return LFSFileInfo(fileOid="0" * 64, filename="x", oid="0" * 64, pushedAt="2024-01-01T00:00:00.000Z", size=1)


def test_lfs_files_are_listed_in_pages(local_hub, monkeypatch):
    from ckpt_localhub import api_storage

    monkeypatch.setattr(api_storage, "LFS_FILES_PAGE", 2)
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.create_commit(REPO, [CommitOperationAdd(f"{i}.bin", os.urandom(100 + i)) for i in range(5)],
                      commit_message="five")
    assert sorted(f.filename for f in api.list_lfs_files(REPO)) == [f"{i}.bin" for i in range(5)]
