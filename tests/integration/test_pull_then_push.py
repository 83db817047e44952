"""Pull a checkpoint, push it elsewhere (issue 28, finding 2): an ordinary release step.

A pulled dir holds the tool's own files beside the checkpoint's: the pull record, a copy of
the manifest, and for a signed folder ``model.sig`` and the provenance statement. A push of
it uploads none of the record files, writes its own manifest (and signature and statement
when it signs), says so in one line, and the pushed folder pulls verified.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.client import Client
from ckpt_action.errors import InputError
from ckpt_action.options import Signing
from ckpt_localhub import LocalHub
from tests.conftest import read_tree, write_checkpoint
from tests.helpers.signing_helpers import make_key

FILES = {"model.safetensors": b"w" * 5000, "config.json": b'{"a": 1}', "optimizer/state.pt": b"o" * 300}
RECORD, MANIFEST, SIG, PROVENANCE = ".ckpt-pull.json", "ckpt-manifest.json", "model.sig", "ckpt-provenance.json"


@pytest.fixture
def hub(local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    for name in list(os.environ):
        if name.startswith("CKPT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CKPT_RETRY_DELAY", "0.05")
    return local_hub


def files_at(hub: LocalHub, repo: str, revision: str, folder: str) -> list[str]:
    from huggingface_hub import HfApi

    tree = HfApi(endpoint=hub.url).list_repo_tree(repo, path_in_repo=folder, revision=revision, recursive=True)
    return sorted(f.path[len(folder) + 1:] for f in tree if not hasattr(f, "tree_id"))


def pulled(hub: LocalHub, tmp_path: Path, **sign: object) -> Path:
    handle = ckpt.push(write_checkpoint(tmp_path / "src", FILES), "o/run", step=300, endpoint=hub.url, **sign)
    return ckpt.pull(handle, tmp_path / "got" / "ck", endpoint=hub.url)


def test_python_a_pulled_checkpoint_pushes_elsewhere_without_the_tools_files(hub, tmp_path, caplog):
    got = pulled(hub, tmp_path)
    assert (got / RECORD).is_file() and (got / MANIFEST).is_file()
    with caplog.at_level("INFO", logger="ckpt_action"):
        res = Client(hub.url).push(got, "o/release", subfolder="sft")
    assert files_at(hub, "o/release", res.handle.revision, "sft") == sorted([*FILES, MANIFEST])
    assert res.left_out == (RECORD, MANIFEST)
    notes = [r.getMessage() for r in caplog.records if RECORD in r.getMessage()]
    assert len(notes) == 1 and "not uploaded" in notes[0], caplog.records
    again = ckpt.pull(res.handle, tmp_path / "again", endpoint=hub.url)
    assert read_tree(again) | {MANIFEST: b""} == FILES | {MANIFEST: b""}
    assert json.loads((again / RECORD).read_text())["subfolder"] == "sft"
    # The same, to another subfolder of the same repo, through ckpt.push(ckpt.pull(...)).
    handle = ckpt.push(ckpt.pull(res.handle, tmp_path / "third", endpoint=hub.url), "o/run", subfolder="sft",
                       endpoint=hub.url)
    assert files_at(hub, "o/run", handle.revision, "sft") == sorted([*FILES, MANIFEST])


def test_cli_pull_then_push_to_another_repo_says_so_in_one_line(hub, cli_in_process, tmp_path):
    ckpt.push(write_checkpoint(tmp_path / "src", FILES), "o/run", step=300, endpoint=hub.url)
    env = {"HF_ENDPOINT": hub.url}
    run = cli_in_process("pull", "--repo", "o/run", "--latest", "--local-dir", "got/ck", **env)
    assert run.code == 0, run.stderr
    run = cli_in_process("push", "--repo", "o/other", "--local-dir", "got/ck", "--subfolder", "sft", "--json", **env)
    assert run.code == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if RECORD in line]
    assert len(notes) == 1 and "not uploaded" in notes[0] and "--local-dir" in notes[0], run.stderr
    revision = run.json["revision"]
    assert files_at(hub, "o/other", revision, "sft") == sorted([*FILES, MANIFEST])
    run = cli_in_process("pull", "--repo", "o/other", "--subfolder", "sft", "--local-dir", "back", "--json", **env)
    assert run.code == 0 and run.json["verified_by"] == "manifest", run.stderr


def test_a_signed_pull_re_pushed_signs_anew_or_drops_the_old_signature(hub, tmp_path):
    key = make_key(tmp_path)
    got = pulled(hub, tmp_path, signing_key=key.private)
    assert {SIG, PROVENANCE} <= set(os.listdir(got))
    # Signed again when asked: the new folder's own signature and statement, which verify there.
    signed = Client(hub.url).push(got, "o/release", subfolder="v1", signing=Signing(signing_key=key.private))
    assert signed.signer is not None and set(signed.left_out) == {RECORD, MANIFEST, SIG, PROVENANCE}
    back = ckpt.pull(signed.handle, tmp_path / "v1", endpoint=hub.url, verify_key=key.public)
    provenance = json.loads((back / PROVENANCE).read_text())
    assert json.dumps(provenance).count('"v1"') >= 1 and "o/release" in json.dumps(provenance)
    # Not asked to sign: the old signature, which vouched for another folder, is not kept.
    plain = Client(hub.url).push(got, "o/release", subfolder="v2")
    assert plain.signer is None
    assert files_at(hub, "o/release", plain.handle.revision, "v2") == sorted([*FILES, MANIFEST])
    assert ckpt.pull(plain.handle, tmp_path / "v2", endpoint=hub.url) == tmp_path / "v2"


def test_a_pulled_dir_with_a_killed_pulls_leftovers_pushes_without_them(hub, tmp_path):
    got = pulled(hub, tmp_path)
    # What a pull into a mount point keeps inside its target, left by one that was killed.
    write_checkpoint(got, {".ck.ckpt-lock": b"", ".ck.ckpt-abcd1234/model.safetensors": b"half",
                           f"{RECORD}.tmp": b"{"})
    res = Client(hub.url).push(got, "o/release", subfolder="sft")
    assert files_at(hub, "o/release", res.handle.revision, "sft") == sorted([*FILES, MANIFEST])


@pytest.mark.parametrize("name", [RECORD, ".ck.ckpt-lock", ".ck.ckpt-abcd1234/model.safetensors"])
def test_a_reserved_name_in_a_dir_no_pull_wrote_is_still_refused_saying_inside(name, hub, tmp_path):
    src = write_checkpoint(tmp_path / "mine", {**FILES, name: b"not a record"})
    with pytest.raises(InputError) as err:
        ckpt.push(src, "o/run", step=1, endpoint=hub.url)
    message = str(err.value)
    assert "reserved" in message and "inside" in message and "beside" not in message
    assert name.split("/")[0] in message
    # It may be an interrupted or unreadable pull's own: the way out for that is given first.
    assert "delete it if" in message and message.index("delete it") < message.index("rename it")
