"""Where huggingface_hub 2.4.0's own tests showed the local Hub answering differently from
the Hub (issue 18, item 20), driven by the real client: deleting a folder named without
its trailing slash, a moved repo's old id, and backslashes in paths.

Cases ported from huggingface_hub's tests/test_hf_api.py:
``test_create_commit_delete_folder_implicit``, ``test_create_commit_delete_folder_explicit``,
``test_create_commit_implicit_delete_folder_is_ok``, ``test_create_file_with_relative_path``,
``test_move_repo_normal_usage``, ``test_move_repo_target_already_exists``.
"""

from __future__ import annotations

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

from ckpt_localhub.names import InvalidPath, check_path
from tests.helpers.localhub_fixtures import TOKEN


@pytest.fixture
def folders(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    repo_id = api.create_repo("local-user/folders").repo_id
    api.create_commit(repo_id=repo_id, commit_message="Init repo", operations=[
        CommitOperationAdd(path_or_fileobj=b"data", path_in_repo="1/file_1.md"),
        CommitOperationAdd(path_or_fileobj=b"data", path_in_repo="1/file_2.md"),
        CommitOperationAdd(path_or_fileobj=b"data", path_in_repo="2/file_3.md"),
    ])
    return api, repo_id


def test_delete_folder_implicit_with_slash(folders, hf_client):
    api, repo_id = folders
    api.create_commit(repo_id=repo_id, commit_message="delete", operations=[CommitOperationDelete("1/")])
    for name in ("1/file_1.md", "1/file_2.md"):
        with pytest.raises(EntryNotFoundError):
            hf_hub_download(repo_id, name, endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)
    hf_hub_download(repo_id, "2/file_3.md", endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)


def test_delete_folder_explicit(folders, hf_client):
    api, repo_id = folders
    api.delete_folder(path_in_repo="1", repo_id=repo_id)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(repo_id, "1/file_1.md", endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)


def test_delete_folder_named_without_its_slash_deletes_it_like_the_hub(folders):
    # CommitOperationDelete("1") sends deletedFile; the Hub deletes the folder (huggingface_hub #2259).
    api, repo_id = folders
    api.create_commit(repo_id=repo_id, commit_message="Failing delete folder", operations=[CommitOperationDelete("1")])
    assert sorted(api.list_repo_files(repo_id)) == [".gitattributes", "2/file_3.md"]
    with pytest.raises(EntryNotFoundError):  # what is not there at all is still not found
        api.create_commit(repo_id=repo_id, commit_message="again", operations=[CommitOperationDelete("1")])


def test_backslash_is_an_ordinary_path_character(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    repo_id = api.create_repo("local-user/slashes").repo_id
    api.upload_file(path_or_fileobj=b"content", path_in_repo="folder/..\\..\\file", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"win", path_in_repo="a\\b.txt", repo_id=repo_id)
    assert {"folder/..\\..\\file", "a\\b.txt"} <= set(api.list_repo_files(repo_id))
    got = hf_hub_download(repo_id, "a\\b.txt", endpoint=api.endpoint, token=TOKEN, cache_dir=hf_client)
    assert open(got, "rb").read() == b"win"
    # What still leaves the repo or confuses git is refused, with the Hub's 422 (the client itself
    # refuses ".." segments and ".git" before sending; the server's check is shared with preupload).
    for bad in ("..\\ddd", "a//b", "a/./b"):
        with pytest.raises(HfHubHTTPError) as exc:
            api.upload_file(path_or_fileobj=b"content", path_in_repo=bad, repo_id=repo_id)
        assert exc.value.response.status_code == 422, bad
    for bad in ("a/../b", ".git/config", "a/.git", "/abs"):
        with pytest.raises(InvalidPath):
            check_path(bad)


def test_a_moved_repo_answers_its_old_id_with_a_redirect(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    for repo_type in (None, "dataset"):
        api.create_repo("local-user/old", repo_type=repo_type)
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="local-user/old", repo_type=repo_type)
        api.upload_file(path_or_fileobj=b"\0lfs" * 100, path_in_repo="w.bin", repo_id="local-user/old",
                        repo_type=repo_type)
        api.move_repo(from_id="local-user/old", to_id="local-user/New", repo_type=repo_type)
        # The API and /resolve/ under the old id: the same answers, through a same-host redirect.
        assert api.repo_info("local-user/old", repo_type=repo_type).id == "local-user/New"
        assert api.repo_exists("local-user/old", repo_type=repo_type)
        assert "x.txt" in api.list_repo_files("local-user/old", repo_type=repo_type)
        for name, data in (("x.txt", b"x"), ("w.bin", b"\0lfs" * 100)):
            got = hf_hub_download("local-user/old", name, repo_type=repo_type, endpoint=api.endpoint, token=TOKEN,
                                  cache_dir=hf_client)
            assert open(got, "rb").read() == data
        # Writes under the old id land in the new repo.
        api.upload_file(path_or_fileobj=b"y", path_in_repo="y.txt", repo_id="local-user/old", repo_type=repo_type)
        assert "y.txt" in api.list_repo_files("local-user/New", repo_type=repo_type)
        api_root = f"{local_hub.url}/api/{repo_type or 'model'}s"
        answer = httpx.get(f"{api_root}/local-user/old/revision/main?x=1", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 307
        assert answer.headers["Location"] == f"{api_root}/local-user/New/revision/main?x=1"
        # The old name can be taken again: then it is a repo of its own, no longer a redirect.
        api.create_repo("local-user/old", repo_type=repo_type)
        assert "x.txt" not in api.list_repo_files("local-user/old", repo_type=repo_type)
        api.delete_repo("local-user/old", repo_type=repo_type)
        api.delete_repo("local-user/New", repo_type=repo_type)
    # A target that exists is refused in the Hub's words.
    api.create_repo("local-user/one")
    api.create_repo("local-user/two")
    with pytest.raises(HfHubHTTPError, match=r"A model repository called .* already exists"):
        api.move_repo(from_id="local-user/one", to_id="local-user/two")
