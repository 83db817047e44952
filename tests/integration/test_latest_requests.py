"""What ``latest`` asks the Hub for: a complete folder is found and checked in two requests
(the top-level listing at the branch, the manifest), the commit taken from the Hub's answer
to the manifest read; and a push that lands between the two is judged at that commit."""

from __future__ import annotations

import pytest

from tests.conftest import write_checkpoint


def _push(cli, env, tmp_path, step: int, fill: int, subfolder: str | None = None) -> None:
    src = write_checkpoint(tmp_path / f"c{step}-{fill}", {"model.safetensors": bytes([fill]) * 5000,
                                                          "nested/config.json": b"{}"})
    args = ["--subfolder", subfolder] if subfolder else []
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), *args, env=env).code == 0


def test_latest_checks_a_complete_folder_in_two_requests(hub_server, hf_client, cli, tmp_path):
    from huggingface_hub import HfApi

    from tests.conftest import clean_env

    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2):
        _push(cli, env, tmp_path, step, step)
    head = HfApi(endpoint=hub.url).repo_info("o/r").sha
    start = len(hub.log_entries())
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0 and run.json["subfolder"] == "checkpoint-2" and run.json["verified"] is True
    paths = [e["path"] for e in hub.log_entries()[start:]]
    assert len(paths) == 2, paths
    assert "/tree/main" in paths[0] and paths[1].endswith("/resolve/main/checkpoint-2/ckpt-manifest.json")
    assert run.json["revision"] == head  # a commit, never the branch's name


@pytest.fixture
def racing(hub_server, hf_client, cli, tmp_path, monkeypatch):
    """A repo with checkpoint-1 and -2, and a way to run a call whose top-level listing is
    answered at the head, then ``change`` lands a commit before anything else is read."""
    from ckpt_action.stores.hub.repo import RemoteRepo
    from tests.conftest import clean_env

    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2):
        _push(cli, env, tmp_path, step, step)
    listed = RemoteRepo.top_level_folders

    def run(change, call):
        def listing_then_change(self, sha):
            folders = listed(self, sha)
            monkeypatch.setattr(RemoteRepo, "top_level_folders", listed)
            change()
            return folders

        monkeypatch.setattr(RemoteRepo, "top_level_folders", listing_then_change)
        return call()

    return hub, env, run


def test_a_push_landing_between_the_listing_and_the_manifest_read_is_judged_at_that_commit(racing, cli, tmp_path):
    """checkpoint-2 pushed again (other bytes, a new manifest) after the listing was answered:
    latest answers the commit the manifest came from and the folder as it is there."""
    from huggingface_hub import HfApi

    import ckpt_action as ckpt_api

    hub, env, run = racing
    found = run(lambda: _push(cli, env, tmp_path, 2, 7, subfolder="checkpoint-2"),
                lambda: ckpt_api.latest("o/r", endpoint=hub.url, token=None))
    head = HfApi(endpoint=hub.url).repo_info("o/r").sha
    assert found.subfolder == "checkpoint-2" and found.revision == head, found
    # the listing's tree id was the old folder's: the folder was listed again at the new commit
    assert any(e["path"].startswith(f"/api/models/o/r/tree/{head}/checkpoint-2") for e in hub.log_entries())
    dest = tmp_path / "pulled"
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-2", "--revision", found.revision,
                 "--local-dir", str(dest), env=env)
    assert pulled.code == 0, pulled.stderr
    assert (dest / "model.safetensors").read_bytes() == bytes([7]) * 5000


def test_a_file_replaced_under_an_unchanged_manifest_in_that_moment_is_refused_by_the_pull(racing, cli, tmp_path):
    """Another writer replaces a file of checkpoint-2 and leaves its manifest: the listing
    (older) and the manifest agree, so latest names the folder at the newer commit; the pull
    that follows checks every file against the manifest and refuses it, writing nothing."""
    from huggingface_hub import HfApi

    import ckpt_action as ckpt_api

    hub, _env, run = racing
    dest = tmp_path / "pulled"

    def replace() -> None:
        HfApi(endpoint=hub.url).upload_file(path_or_fileobj=b"\x09" * 5000, repo_id="o/r",
                                            path_in_repo="checkpoint-2/model.safetensors")

    with pytest.raises(ckpt_api.CkptError) as err:
        run(replace, lambda: ckpt_api.pull("o/r", str(dest), endpoint=hub.url, token=None))
    assert "checkpoint-2" in str(err.value) or "model.safetensors" in str(err.value)
    assert not (dest / "model.safetensors").exists()
