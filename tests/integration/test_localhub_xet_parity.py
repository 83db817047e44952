"""Cases of huggingface_hub 2.4.0's own Xet tests (marked ``xet``) where the local Hub
answered differently from the Hub, ported here against the real client.

Each test names the upstream case it stands for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download

from tests.helpers.localhub_fixtures import TOKEN, entries


def test_copy_files_repo_to_repo_duplicates_xet_files_server_side(xet_hub, xet_client):
    """tests/test_copy_files.py::test_copy_files_repo_to_repo: a cross-repo copy of a Xet file
    asks the source repo's ``lfs-files/duplicate`` route, then commits it by sha256; no byte moves."""
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    src = api.create_repo("local-user/copy-src").repo_id
    dst = api.create_repo("local-user/copy-dst", repo_type="dataset").repo_id
    weights = os.urandom(1024 * 1024)
    api.upload_file(repo_id=src, path_in_repo="config.json", path_or_fileobj=b'{"key": "value"}')
    api.upload_file(repo_id=src, path_in_repo="data/a.txt", path_or_fileobj=b"text data")
    api.upload_file(repo_id=src, path_in_repo="data/sub/w.bin", path_or_fileobj=weights)
    xorb_posts = len(entries(xet_hub, "POST", "/v1/xorbs/", listener="cas"))

    api.copy_files(f"hf://{src}/data/", f"hf://datasets/{dst}/copied/")

    [dup] = entries(xet_hub, "POST", f"/api/models/{src}/lfs-files/duplicate")
    assert dup["status"] == 200
    assert len(entries(xet_hub, "POST", "/v1/xorbs/", listener="cas")) == xorb_posts  # nothing re-uploaded
    assert {"copied/a.txt", "copied/sub/w.bin"} <= set(api.list_repo_files(dst, repo_type="dataset"))
    [orig] = api.get_paths_info(src, ["data/sub/w.bin"])
    [copy] = api.get_paths_info(dst, ["copied/sub/w.bin"], repo_type="dataset")
    assert copy.xet_hash is not None and copy.xet_hash == orig.xet_hash
    assert copy.lfs is not None and orig.lfs is not None and copy.lfs.sha256 == orig.lfs.sha256
    path = hf_hub_download(dst, "copied/sub/w.bin", repo_type="dataset", endpoint=xet_hub.url, token=TOKEN,
                           cache_dir=xet_client)
    assert Path(path).read_bytes() == weights


def _duplicate(api: HfApi, src: str, files: list[dict[str, str]]) -> dict[str, object]:
    from huggingface_hub.utils import get_session, hf_raise_for_status

    response = get_session().post(f"{api.endpoint}/api/models/{src}/lfs-files/duplicate",
                                  headers=api._build_hf_headers(),
                                  json={"target": {"type": "model", "name": src}, "files": files})
    hf_raise_for_status(response)
    answer: dict[str, object] = response.json()
    return answer


def test_duplicate_names_each_file_it_cannot_copy(xet_hub, xet_client):
    """The route answers per file: one whose sha256 and Xet hash the Hub does not hold together is
    listed in ``failed`` (from which huggingface_hub raises FileDuplicationError), the others succeed."""
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    src = api.create_repo("local-user/dup-src").repo_id
    api.upload_file(repo_id=src, path_in_repo="w.bin", path_or_fileobj=os.urandom(64 * 1024))
    [info] = api.get_paths_info(src, ["w.bin"])
    assert info.lfs is not None and info.xet_hash is not None
    good = {"xetHash": info.xet_hash, "sha256": info.lfs.sha256, "filename": "w.bin"}
    unknown = {"xetHash": "ab" * 32, "sha256": "cd" * 32, "filename": "gone.bin"}
    mismatched = {"xetHash": "ef" * 32, "sha256": info.lfs.sha256, "filename": "w.bin"}
    answer = _duplicate(api, src, [good, unknown, mismatched])
    assert answer["processed"] == 3 and answer["succeeded"] == 1
    assert [f["sha256"] for f in answer["failed"]] == ["cd" * 32, info.lfs.sha256]  # type: ignore[attr-defined]
    # A pair the Hub holds, but for another repo: the source must hold the file itself.
    other = api.create_repo("local-user/dup-other", private=True).repo_id
    api.upload_file(repo_id=other, path_in_repo="s.bin", path_or_fileobj=os.urandom(64 * 1024))
    [secret] = api.get_paths_info(other, ["s.bin"])
    assert secret.lfs is not None and secret.xet_hash is not None
    answer = _duplicate(api, src, [{"xetHash": secret.xet_hash, "sha256": secret.lfs.sha256, "filename": "s.bin"}])
    assert answer["succeeded"] == 0, answer



def test_duplicate_needs_write_access_and_an_existing_target(tmp_path, xet_client):
    """Anonymous callers may read a public source but not write the target (401, as every write);
    a target that does not exist answers RepoNotFound."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    from ckpt_localhub import LocalHub

    with LocalHub(tmp_path / "data", token=TOKEN) as hub:
        owner = HfApi(endpoint=hub.url, token=TOKEN)
        src = owner.create_repo("local-user/dup-auth").repo_id
        owner.upload_file(repo_id=src, path_in_repo="w.bin", path_or_fileobj=os.urandom(64 * 1024))
        [info] = owner.get_paths_info(src, ["w.bin"])
        assert info.lfs is not None and info.xet_hash is not None
        files = [{"xetHash": info.xet_hash, "sha256": info.lfs.sha256, "filename": "w.bin"}]
        with pytest.raises(HfHubHTTPError) as anonymous:
            _duplicate(HfApi(endpoint=hub.url, token=False), src, files)
        assert anonymous.value.response.status_code == 401
        from huggingface_hub.utils import get_session, hf_raise_for_status
        response = get_session().post(f"{hub.url}/api/models/{src}/lfs-files/duplicate",
                                      headers=owner._build_hf_headers(),
                                      json={"target": {"type": "dataset", "name": "local-user/nowhere"},
                                            "files": files})
        with pytest.raises(RepositoryNotFoundError):
            hf_raise_for_status(response)
