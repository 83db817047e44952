"""The Python API (``import ckpt_action as ckpt``) against the in-process local Hub.

Real huggingface_hub client over HTTP on loopback; W&B offline, read back from its record log.
"""

from __future__ import annotations

import doctest
import json
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action import api
from ckpt_localhub import LocalHub
from tests.conftest import read_tree, write_checkpoint
from tests.helpers.wandb_records import decode_single_run

ROOT = Path(__file__).resolve().parents[2]
SHA = re.compile(r"^[0-9a-f]{40}$")
# model_signing and what it pulls in (sigstore, cryptography, pyOpenSSL) load only to sign or verify.
HEAVY = ("huggingface_hub", "wandb", "transformers", "torch", "click", "model_signing", "sigstore", "cryptography",
         "OpenSSL")


def files_for(step: int) -> dict[str, bytes]:
    return {"model.safetensors": step.to_bytes(4, "big") * 5000, "config.json": json.dumps({"step": step}).encode(),
            "nested/trainer_state.json": json.dumps({"global_step": step}).encode()}


@pytest.fixture
def hub(local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    """The in-process Hub, with fast retries and no ambient CKPT_/WANDB_ settings."""
    for name in list(os.environ):
        if name.startswith(("CKPT_", "WANDB_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CKPT_RETRY_DELAY", "0.05")
    monkeypatch.setenv("CKPT_RETRY_MAX_DELAY", "0.2")
    return local_hub


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# --------------------------------------------------------------------------- the package surface


def test_import_loads_no_client_wandb_transformers_or_torch() -> None:
    loaded = run_python(
        "import sys, ckpt_action as ckpt\n"
        "ckpt.push, ckpt.latest, ckpt.pull, ckpt.log_pointer, ckpt.CheckpointHandle, ckpt.CkptError\n"
        "from ckpt_action import *\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    assert loaded == "[]"


def test_all_names_resolve_and_errors_are_one_hierarchy() -> None:
    assert set(ckpt.__all__) == set(ckpt._EXPORTS)
    for name in ckpt.__all__:
        assert getattr(ckpt, name) is not None, name
    assert ckpt.CheckpointHandle is ckpt_action_handle()
    for name in ("InputError", "RemoteError", "AuthError", "NotFoundError", "IntegrityError", "NoCheckpointError",
                 "ConflictError", "WandbError"):
        assert issubclass(getattr(ckpt, name), ckpt.CkptError)
    assert (ckpt.InputError.exit_code, ckpt.RemoteError.exit_code, ckpt.NoCheckpointError.exit_code) == (2, 1, 3)
    with pytest.raises(AttributeError):
        ckpt.no_such_name  # noqa: B018
    assert "push" in dir(ckpt)


def ckpt_action_handle() -> type:
    from ckpt_action.handle import CheckpointHandle

    return CheckpointHandle


def test_push_and_pull_stay_functions_after_their_core_modules_load() -> None:
    # ckpt_action/push.py and pull.py are also submodules; importing them must not shadow the API.
    out = run_python(
        "import ckpt_action.ops.push, ckpt_action.ops.pull, ckpt_action.ops.release, ckpt_action as ckpt\n"
        "from ckpt_action.ops.push import PushResult\n"
        "print(ckpt.push.__module__, ckpt.pull.__module__)")
    assert out == "ckpt_action.api ckpt_action.api"
    assert ckpt.push is api.push and ckpt.pull is api.pull


def test_docstring_examples_run(hub: LocalHub) -> None:
    # The API's own examples run in the doctest collection, against the local Hub the root
    # conftest.py gives them; this runs the module doc's round trip, which needs nothing.
    from ckpt_action.integrations import pushqueue

    assert doctest.testmod(pushqueue, optionflags=doctest.ELLIPSIS).failed == 0
    finder = doctest.DocTestFinder()
    module_doc = next(t for t in finder.find(api) if t.name == "ckpt_action.api")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(module_doc)
    assert runner.summarize(verbose=False).failed == 0 and len(module_doc.examples) >= 5


# --------------------------------------------------------------------------- push, latest, pull


def test_push_latest_pull_round_trip(hub: LocalHub, tmp_path: Path) -> None:
    handles = {}
    for step in (10, 20):
        src = write_checkpoint(tmp_path / f"out/checkpoint-{step}", files_for(step))
        handles[step] = ckpt.push(src, repo="org/run", step=step, endpoint=hub.url)
    sft = ckpt.push(write_checkpoint(tmp_path / "out/sft", {"w.bin": b"sft"}), repo="org/run", subfolder="sft",
                    endpoint=hub.url)
    h = handles[20]
    assert (h.repo, h.subfolder, h.step, h.endpoint) == ("org/run", "checkpoint-20", 20, hub.url)
    assert SHA.match(h.revision) and SHA.match(sft.revision) and sft.step is None

    found = ckpt.latest("org/run", endpoint=hub.url)
    assert found is not None
    assert (found.subfolder, found.step) == ("checkpoint-20", 20)
    assert found.revision == sft.revision  # read at the head, which the sft push moved on

    path = ckpt.pull(found, tmp_path / "resume", endpoint=hub.url)
    assert path == (tmp_path / "resume").absolute()
    assert read_tree(path) == {**files_for(20), "ckpt-manifest.json": read_tree(path)["ckpt-manifest.json"]}

    # A repo id with subfolder and a SHA: exactly that snapshot, after main has moved on.
    ckpt.push(write_checkpoint(tmp_path / "sft2", {"w.bin": b"newer"}), repo="org/run", subfolder="sft",
              endpoint=hub.url)
    old = ckpt.pull("org/run", tmp_path / "sft-old", subfolder="sft", revision=sft.revision, endpoint=hub.url)
    assert (old / "w.bin").read_bytes() == b"sft"
    # A repo id alone: the latest complete checkpoint.
    assert (ckpt.pull("org/run", tmp_path / "newest", endpoint=hub.url) / "config.json").read_bytes() == \
        files_for(20)["config.json"]


def test_identical_push_makes_no_commit(hub: LocalHub, tmp_path: Path) -> None:
    src = write_checkpoint(tmp_path / "c", files_for(5))
    first = ckpt.push(src, repo="org/run", step=5, endpoint=hub.url)
    again = ckpt.push(src, repo="org/run", step=5, endpoint=hub.url)
    assert again == first


def test_latest_none_only_when_there_is_none(hub: LocalHub, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ckpt_action"):
        assert ckpt.latest("org/missing", endpoint=hub.url) is None
    assert "org/missing does not exist (" in caplog.text and "start over" in caplog.text
    ckpt.push(write_checkpoint(tmp_path / "sft", {"a": b"1"}), repo="org/run", subfolder="sft", endpoint=hub.url)
    assert ckpt.latest("org/run", endpoint=hub.url) is None
    with pytest.raises(ckpt.NoCheckpointError):
        ckpt.latest("org/run", endpoint=hub.url, require=True)
    with pytest.raises(ckpt.NoCheckpointError):
        ckpt.pull("org/run", tmp_path / "nothing", endpoint=hub.url)
    with pytest.raises(ckpt.NotFoundError):
        ckpt.latest("org/run", revision="no-such-branch", endpoint=hub.url)


def test_latest_raises_when_it_cannot_tell(hub: LocalHub) -> None:
    with pytest.raises(ckpt.RemoteError, match="cannot reach"):
        ckpt.latest("org/run", endpoint=closed_port_url(), retries=0, timeout=5)


def test_environment_defaults(hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    h = ckpt.push(write_checkpoint(tmp_path / "c", files_for(3)), "org/env", step=3)
    assert h.endpoint == hub.url and ckpt.latest("org/env") == h
    monkeypatch.setenv("CKPT_TIMEOUT", "soon")
    with pytest.raises(ckpt.InputError, match="CKPT_TIMEOUT"):
        ckpt.latest("org/env")


def test_an_explicit_endpoint_does_not_become_the_default(hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert ckpt.latest("org/none", endpoint=hub.url) is None
    assert "HF_ENDPOINT" not in os.environ  # a later call without endpoint= still means the public Hub


def test_bad_input_raises_before_any_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_ENDPOINT", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    nowhere = closed_port_url()  # an InputError proves no request was made: any would fail differently
    src = write_checkpoint(tmp_path / "c", {"a": b"1"})
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    handle = ckpt.CheckpointHandle("org/run", "checkpoint-1", "a" * 40, 1, nowhere)
    cases = [
        lambda: ckpt.push(src, repo="not a repo", step=1, endpoint=nowhere),
        lambda: ckpt.push(src, repo="org/run", endpoint=nowhere),
        lambda: ckpt.push(src, repo="org/run", step=2, subfolder="checkpoint-3", endpoint=nowhere),
        lambda: ckpt.push(tmp_path / "missing", repo="org/run", step=1, endpoint=nowhere),
        lambda: ckpt.push(src, repo="org/run", step=1),  # the public Hub without a token
        lambda: ckpt.pull(handle, tmp_path / "full"),
        lambda: ckpt.pull(handle, tmp_path / "t", subfolder="checkpoint-2"),
        lambda: ckpt.pull(handle, tmp_path / "t", revision="b" * 40),
        lambda: ckpt.pull("org/run", tmp_path / "t", subfolder="../up", endpoint=nowhere),
        lambda: ckpt.pull(42, tmp_path / "t", endpoint=nowhere),  # type: ignore[arg-type]
        lambda: ckpt.latest("org/run", revision="bad..rev", endpoint=nowhere),
        lambda: ckpt.promote("org/run", "release", endpoint=nowhere),
        lambda: ckpt.promote(handle, "checkpoint-1/inner"),
        lambda: ckpt.prune("org/run", 0, endpoint=nowhere),
        lambda: ckpt.latest("org/run", endpoint="ftp://host"),
    ]
    for i, case in enumerate(cases):
        with pytest.raises(ckpt.InputError):
            case()
            pytest.fail(f"case {i} did not raise")
    assert not (tmp_path / "t").exists()


def test_pull_is_verified_and_leaves_nothing_on_failure(tmp_path: Path, hf_client: Path) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text("[]")
    with LocalHub(tmp_path / "hub", faults=faults) as hub:
        h = ckpt.push(write_checkpoint(tmp_path / "c", files_for(7)), "org/run", step=7, endpoint=hub.url)
        faults.write_text(json.dumps([{"method": "GET", "path": r"model\.safetensors$", "corrupt": True,
                                       "times": -1}]))
        os.utime(faults, (1, 1))  # a new mtime even within the same clock tick
        with pytest.raises(ckpt.IntegrityError, match="does not match"):
            ckpt.pull(h, tmp_path / "target", endpoint=hub.url, retries=0)
    assert not (tmp_path / "target").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".target")]


# --------------------------------------------------------------------------- promote, list, prune


def test_promote_list_prune(hub: LocalHub, tmp_path: Path) -> None:
    handles = [ckpt.push(write_checkpoint(tmp_path / f"c{s}", files_for(s)), "org/run", step=s, endpoint=hub.url)
               for s in (1, 2, 3)]
    release = ckpt.promote(handles[0], "release", tag="v1", endpoint=hub.url)
    assert (release.subfolder, release.step) == ("release", 1) and SHA.match(release.revision)
    assert ckpt.promote(handles[0], "release", tag="v1", endpoint=hub.url) == release  # a re-run is a no-op
    with pytest.raises(ckpt.ConflictError):
        ckpt.promote("org/run", "release", subfolder="checkpoint-2", tag="v1", endpoint=hub.url)

    infos = ckpt.list_checkpoints("org/run", endpoint=hub.url)
    assert [(i.subfolder, i.status) for i in infos] == [
        ("checkpoint-3", "complete"), ("checkpoint-2", "complete"), ("checkpoint-1", "complete"),
        ("release", "complete")]
    assert ckpt.list_checkpoints("org/none", endpoint=hub.url) == []

    plan = ckpt.prune("org/run", 1, dry_run=True, endpoint=hub.url)
    assert plan.dry_run and plan.deleted == ["checkpoint-2"]
    assert plan.kept == {"checkpoint-1": "source of a promoted folder", "checkpoint-3": "among the last 1"}
    done = ckpt.prune("org/run", 1, endpoint=hub.url)
    assert done.deleted == ["checkpoint-2"] and SHA.match(done.revision or "")
    assert [i.subfolder for i in ckpt.list_checkpoints("org/run", endpoint=hub.url)] == [
        "checkpoint-3", "checkpoint-1", "release"]


# --------------------------------------------------------------------------- W&B


def test_log_pointer_to_the_active_run_or_the_given_one(wandb_offline: Path) -> None:
    import wandb

    rev = "0123456789abcdef0123456789abcdef01234567"
    h300 = ckpt.CheckpointHandle("org/run", "checkpoint-300", rev, 300, "http://127.0.0.1:8000")
    sft = ckpt.CheckpointHandle("org/run", "sft", rev, None, "http://127.0.0.1:8000")
    run = wandb.init(project="ckpt-api", settings=wandb.Settings(silent=True, console="off"))
    try:
        first = ckpt.log_pointer(h300)  # wandb.run
        second = ckpt.log_pointer(sft, run=run, extra={"note": "sft"})
        assert first.run_id == second.run_id == run.id and first.project == "ckpt-api"
        assert first.aliases == ("latest", "step-300") and second.aliases == ("latest",)
        assert wandb.run is run  # the training run stays open
    finally:
        run.finish()
    wandb.teardown()
    arts = {a.name: a for a in decode_single_run(wandb_offline).artifacts}
    assert set(arts) == {"org--run--checkpoint", "org--run--sft"}
    assert sorted(arts["org--run--checkpoint"].aliases) == ["latest", "step-300"]
    assert arts["org--run--checkpoint"].checkpoint_json == h300.to_dict()
    assert arts["org--run--sft"].metadata["note"] == "sft"
    assert {a.run_id for a in arts.values()} == {run.id}

    with pytest.raises(ckpt.WandbError, match="no active W&B run"):
        ckpt.log_pointer(h300)


def test_a_disabled_run_is_no_run(wandb_offline: Path) -> None:
    import wandb

    from ckpt_action.wandb.sdk import active_run, log_pointer_to_run

    h = ckpt.CheckpointHandle("org/run", "checkpoint-1", "a" * 40, 1)
    run = wandb.init(mode="disabled")
    try:
        assert wandb.run is not None and active_run() is None  # it would log nothing
        with pytest.raises(ckpt.WandbError, match="no active W&B run"):
            ckpt.log_pointer(h)
        with pytest.raises(ckpt.WandbError, match="no active W&B run"):
            log_pointer_to_run(h, run)
    finally:
        run.finish()


def test_pull_updates_in_place_and_pulls_part_of_a_checkpoint(hub: LocalHub, tmp_path: Path) -> None:
    src = write_checkpoint(tmp_path / "src", files_for(4))
    h = ckpt.push(src, "org/part", step=4, endpoint=hub.url)
    dest = tmp_path / "dest"
    ckpt.pull(h, dest, include=["*.safetensors"], endpoint=hub.url)
    assert set(read_tree(dest)) == {"model.safetensors"}
    # The same dir again, whole this time: an update in place, no force needed.
    ckpt.pull(h, dest, endpoint=hub.url)
    assert {k: v for k, v in read_tree(dest).items() if k != "ckpt-manifest.json"} == files_for(4)
    with pytest.raises(ckpt.InputError, match="pattern"):
        ckpt.pull(h, tmp_path / "other", include=[""], endpoint=closed_port_url())
    assert not (tmp_path / "other").exists()


def test_no_submodule_is_named_like_a_public_name_of_the_package() -> None:
    # A submodule named like an export would replace it as the package's attribute once
    # imported (ckpt_action.push the module, not the function).
    import pkgutil

    import ckpt_action as package

    exported = set(package.__all__)
    for info in pkgutil.walk_packages(package.__path__, prefix="ckpt_action."):
        leaf = info.name.rpartition(".")[2]
        top = info.name.split(".")[1]
        assert top not in exported, f"{info.name} shadows ckpt_action.{top}"
        assert leaf not in exported or "." in info.name.removeprefix("ckpt_action."), info.name
