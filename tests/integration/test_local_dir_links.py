"""The local dir of a push is untrusted while it is read: a link that appears during the
push (a job, or an attacker sharing the runner, writing into the dir) is refused on every
re-scan and every read, never followed; and file names follow one rule, the same for push
and for every reader."""

from __future__ import annotations

import os

import pytest

from ckpt_action import names
from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import ckpt, env_for, one_line_error, seed
from tests.helpers.hostile_proxy import hostile_fixture  # noqa: F401

PREUPLOAD = r"/preupload/"
COMMIT = r"/api/models/[^/]+/[^/]+/commit/"
SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- not for the Hub"


def _hub_holds(hub, data: bytes) -> bool:
    """Whether any file the local Hub stores holds these bytes."""
    for dirpath, _dirs, files in os.walk(hub.base):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and os.path.isfile(path):
                with open(path, "rb") as fh:
                    if data in fh.read():
                        return True
    return False


@pytest.mark.parametrize("how", ["new-link", "file-becomes-link"])
def test_a_link_appearing_during_the_push_is_refused_not_uploaded(how, hub_server, hostile, cli, tmp_path):
    hub = hub_server()
    secret = tmp_path / "home" / "id_rsa"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    src = write_checkpoint(tmp_path / "src", ckpt(1))

    def plant() -> None:
        if how == "new-link":
            if not (src / "leak.txt").is_symlink():
                os.symlink(secret, src / "leak.txt")
        elif not (src / "config.json").is_symlink():
            (src / "config.json").unlink()
            os.symlink(secret, src / "config.json")

    proxy = hostile(hub)
    proxy.before("POST", PREUPLOAD, plant)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env_for(proxy, tmp_path))
    assert run.code != 0, run.stdout + run.stderr
    assert "symlink" in one_line_error(run.stderr), run.stderr
    assert not _hub_holds(hub, SECRET), "a link's target reached the Hub"


@pytest.mark.parametrize("how", ["new-link", "file-becomes-link"])
def test_a_link_appearing_while_the_commit_is_in_flight_reports_the_commit_that_landed(how, hub_server, hostile, cli,
                                                                                      tmp_path):
    """The link appears after the files were read and sent, just before the commit request:
    the commit lands with the files as they were read. Push then fails (exit 1, not 2: a
    commit was created), naming the SHA that landed and the link, and no link's target is on
    the Hub."""
    from huggingface_hub import HfApi

    hub = hub_server()
    secret = tmp_path / "home" / "id_rsa"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    src = write_checkpoint(tmp_path / "src", ckpt(1))

    def plant() -> None:
        if how == "new-link":
            if not (src / "leak.txt").is_symlink():
                os.symlink(secret, src / "leak.txt")
        elif not (src / "config.json").is_symlink():
            (src / "config.json").unlink()
            os.symlink(secret, src / "config.json")

    proxy = hostile(hub)
    proxy.before("POST", COMMIT, plant)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env_for(proxy, tmp_path))
    line = one_line_error(run.stderr)
    head = HfApi(endpoint=hub.url).list_repo_refs("o/r").branches[0].target_commit
    assert run.code == 1, run.stdout + run.stderr
    assert head in line and "symlink" in line and "nothing" not in line, line
    assert not _hub_holds(hub, SECRET), "a link's target reached the Hub"


BAD_NAMES = ["a\u00a0b.bin", "a\u202etxt.exe", "a\u2066b.bin", "a\\b.bin", "a\nb.bin"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=["nbsp", "rlo", "lri", "backslash", "newline"])
def test_one_file_name_rule_for_push_and_every_reader(name, hub_server, hf_client, hostile, cli, tmp_path):
    """A name the readers refuse in a listing is one push refuses up front, by the same rule."""
    assert names.file_name_problem(name) is not None
    assert names.file_name_problem("model-00001-of-00002.safetensors") is None
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path / "seed", step=1)
    proxy = hostile(hub)
    as_replacement = name.replace("\\", "\\\\")
    proxy.set_rules([{"method": "GET", "path": "/tree/[0-9a-f]{40}/checkpoint-1",
                      "rename": ["config\\.json", as_replacement], "times": -1}])
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "dest"),
              env=env_for(proxy, tmp_path))
    assert run.code == 1, run.stdout + run.stderr
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w", name: b"x"})
    pushed = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "2", env=env_for(hub, tmp_path))
    assert pushed.code == 2, pushed.stdout + pushed.stderr
    assert "--local-dir" in one_line_error(pushed.stderr)


def test_the_file_count_bound_is_checked_by_the_walk(tmp_path, monkeypatch):
    """The 100,001st file is refused by the one walk (a bound of 5 here, so the test stays small)."""
    from ckpt_action.checkpoint import localfiles
    from ckpt_action.disk.source import local_dir_to_push
    from ckpt_action.errors import InputError

    monkeypatch.setattr(localfiles, "MAX_PUSH_FILES", 5)
    src = write_checkpoint(tmp_path / "src", {f"d{i % 2}/f{i}.bin": b"x" for i in range(5)})
    assert local_dir_to_push(str(src)) == src
    (src / "d1" / "one-more.bin").write_bytes(b"x")
    with pytest.raises(InputError, match="more than 5 files"):
        local_dir_to_push(str(src))


def test_the_trust_model_page_states_the_walks_bounds():
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "concepts" / "trust-model.md").read_text(encoding="utf-8")
    assert f"nesting past {names.MAX_PUSH_DEPTH} levels" in page
