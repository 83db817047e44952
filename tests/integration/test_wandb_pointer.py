"""W&B pointer artifacts, offline only: what lands in the .wandb record log and staged files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ckpt_action.errors import CkptError, InputError
from ckpt_action.handle import DEFAULT_ENDPOINT, CheckpointHandle
from ckpt_action.wandb.format import ARTIFACT_TYPE, default_artifact_name, pointer_payload, read_pointer
from ckpt_action.wandb.sdk import PointerResult, WandbError, fetch_pointer, link_to_registry, log_pointer
from tests.conftest import RETRY_MAX_DELAY
from tests.helpers.wandb_records import RunFile, decode_single_run

ROOT = Path(__file__).resolve().parents[2]
REV = "0123456789abcdef0123456789abcdef01234567"
FAKE_HF = "hf_FAKE_not_a_real_token_1234567890SECRET"
FAKE_WANDB_KEY = "f" * 40
HANDLE = CheckpointHandle("org/run", "checkpoint-1200", REV, 1200, "http://127.0.0.1:8000")

_WANDB_ENV_DROP = (
    "WANDB_RUN_ID",
    "WANDB_PROJECT",
    "WANDB_ENTITY",
    "WANDB_RESUME",
    "WANDB_JOB_TYPE",
    "WANDB_NAME",
    "WANDB_API_KEY",
    "WANDB_BASE_URL",
    "WANDB_CONFIG_PATHS",
    "WANDB_DISABLED",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)


def offline_env(tmp: Path) -> dict[str, str]:
    """Every directory wandb writes to, under ``tmp``; offline; quiet."""
    return {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp / "wandb-dir"),
        # Artifact staging defaults to ~/.local/share/wandb: keep it in the test's tmp.
        "WANDB_DATA_DIR": str(tmp / "wandb-dir" / "data"),
        "WANDB_CACHE_DIR": str(tmp / "wandb-dir" / "cache"),
        "WANDB_CONFIG_DIR": str(tmp / "wandb-dir" / "config"),
        "WANDB_ARTIFACT_DIR": str(tmp / "wandb-dir" / "artifacts"),
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
    }


def _teardown_wandb() -> None:
    # The wandb singleton caches WANDB_DIR from the first init; reset it so the next
    # test's WANDB_DIR is honoured (and wandb-core is shut down).
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


def _apply_env(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    for var in _WANDB_ENV_DROP:
        mp.delenv(var, raising=False)
    for k, v in offline_env(tmp).items():
        mp.setenv(k, v)
    (tmp / "wandb-dir").mkdir(parents=True, exist_ok=True)


def decode_flushed(tmp: Path) -> RunFile:
    """Decode the test's run file once wandb-core has shut down: finish() can return while
    it still writes records, and a decode in between sees a run without its artifact."""
    _teardown_wandb()
    return decode_single_run(tmp / "wandb-dir")


@pytest.fixture
def wandb_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    _apply_env(monkeypatch, tmp_path)
    yield tmp_path
    _teardown_wandb()


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PointerResult, RunFile, Path]]:
    """One offline log_pointer with a new run, shared by the read-only checks below."""
    tmp = tmp_path_factory.mktemp("logged")
    with pytest.MonkeyPatch.context() as mp:
        _apply_env(mp, tmp)
        try:
            result = log_pointer(HANDLE, project="ckpt-tests")
        finally:
            _teardown_wandb()
        decoded = decode_single_run(tmp / "wandb-dir")
    yield result, decoded, tmp


def _all_bytes_under(root: Path) -> Iterator[tuple[Path, bytes]]:
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            yield p, p.read_bytes()


# --------------------------------------------------------------------------- import cost


def test_import_does_not_import_wandb() -> None:
    out = subprocess.run(
        [sys.executable, "-c",
         "import ckpt_action.wandb.sdk, ckpt_action.wandb.format, sys; print('wandb' in sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- logging


def test_logged_artifact_record(logged: tuple[PointerResult, RunFile, Path]) -> None:
    result, decoded, _ = logged
    assert len(decoded.artifacts) == 1
    art = decoded.artifacts[0]
    assert art.name == "org--run--checkpoint" == result.artifact_name
    assert art.type == ARTIFACT_TYPE == "model-pointer"
    # wandb does not keep the order aliases were given in.
    assert sorted(art.aliases) == ["latest", "step-1200"]
    assert sorted(result.aliases) == sorted(art.aliases)
    expected = {
        "repo": "org/run",
        "subfolder": "checkpoint-1200",
        "revision": REV,
        "step": 1200,
        "hub_url": f"http://127.0.0.1:8000/org/run/tree/{REV}/checkpoint-1200",
    }
    assert art.metadata == expected == result.payload
    assert [e["path"] for e in art.entries] == ["checkpoint.json"]  # exactly one file, no weights
    assert all(not e["ref"] for e in art.entries)  # a real file, not a reference
    assert art.checkpoint_json == expected
    assert art.run_id == decoded.run_id == result.run_id


def test_new_run_is_a_checkpoint_job(logged: tuple[PointerResult, RunFile, Path]) -> None:
    result, decoded, _ = logged
    assert decoded.job_type == "checkpoint"
    assert decoded.project == "ckpt-tests"
    assert decoded.run_id and decoded.run_id == result.run_id
    # Config is exactly what we passed (nothing) plus wandb's own bookkeeping key.
    assert set(decoded.config_json) <= {"_wandb"}
    assert "exit" in decoded.record_kinds  # the run was finished


def test_read_pointer_round_trip(logged: tuple[PointerResult, RunFile, Path]) -> None:
    _, decoded, tmp = logged
    staged = decoded.artifacts[0].checkpoint_json_path
    assert staged is not None
    assert Path(staged).resolve().is_relative_to((tmp / "wandb-dir" / "data").resolve())
    # wandb stages under a temp name; read_pointer wants the file `wandb artifact get` writes.
    target = tmp / "got" / "checkpoint.json"
    target.parent.mkdir()
    target.write_bytes(Path(staged).read_bytes())
    assert read_pointer(target) == HANDLE
    assert read_pointer(target.parent) == HANDLE


def test_given_run_id_is_used(wandb_tmp: Path) -> None:
    result = log_pointer(HANDLE, project="ckpt-tests", run_id="trainrun0001")
    decoded = decode_flushed(wandb_tmp)
    assert decoded.run_id == "trainrun0001" == result.run_id
    assert decoded.artifacts[0].run_id == "trainrun0001"
    # The training run keeps its own job type: none is imposed when attaching.
    assert decoded.job_type == ""


def test_no_step_custom_name_and_extra(wandb_tmp: Path) -> None:
    handle = CheckpointHandle("org/run", "sft", REV)
    assert default_artifact_name(handle.repo, handle.subfolder) == "org--run--sft"
    result = log_pointer(
        handle, project="ckpt-tests", artifact_name="sft.pointer_v1", extra={"epoch": 3, "note": "ok"}
    )
    art = decode_flushed(wandb_tmp).artifacts[0]
    assert art.name == result.artifact_name == "sft.pointer_v1"
    assert art.aliases == ["latest"]
    assert art.metadata["epoch"] == 3 and art.metadata["step"] is None
    assert art.checkpoint_json == art.metadata
    assert read_pointer_from_json(wandb_tmp, art.checkpoint_json) == CheckpointHandle(
        "org/run", "sft", REV, None, DEFAULT_ENDPOINT
    )


def read_pointer_from_json(tmp: Path, obj: Any) -> CheckpointHandle:
    p = tmp / "pointer-copy.json"
    p.write_text(json.dumps(obj))
    return read_pointer(p)


def test_tokens_land_nowhere(wandb_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A token in the environment, on the command line, and in a config-defaults.yaml in the
    # cwd (which wandb merges into the run config unless told not to).
    monkeypatch.setenv("HF_TOKEN", FAKE_HF)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", FAKE_HF)
    monkeypatch.setenv("WANDB_API_KEY", FAKE_WANDB_KEY)
    monkeypatch.setattr(sys, "argv", ["ckpt-action", "push", "--token", FAKE_HF])
    cwd = wandb_tmp / "cwd"
    cwd.mkdir()
    (cwd / "config-defaults.yaml").write_text(f"hf_token:\n  value: {FAKE_HF}\n")
    monkeypatch.chdir(cwd)
    log_pointer(HANDLE, project="ckpt-tests")
    decoded = decode_flushed(wandb_tmp)
    assert "hf_token" not in decoded.config_json
    wandb_dir = wandb_tmp / "wandb-dir"
    files = list(_all_bytes_under(wandb_dir))
    assert any(p.suffix == ".wandb" for p, _ in files)
    assert any("staging" in p.parts for p, _ in files)
    for path, data in files:
        for secret in (FAKE_HF, FAKE_WANDB_KEY):
            assert secret.encode() not in data, f"{secret[:6]}... found in {path}"


def test_payload_refuses_env_secret_in_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", FAKE_HF)
    with pytest.raises(InputError, match="HF_TOKEN"):
        pointer_payload(HANDLE, {"note": f"token={FAKE_HF}"})


def test_stdout_stays_clean(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import json
        from ckpt_action.handle import CheckpointHandle
        from ckpt_action.wandb.sdk import log_pointer
        r = log_pointer(CheckpointHandle("org/run", "checkpoint-7", "{REV}", 7), project="p")
        print(json.dumps({{"artifact": r.artifact_name}}))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in _WANDB_ENV_DROP}
    env.update(offline_env(tmp_path))
    env.pop("WANDB_SILENT")  # not relying on the env var: the module must be quiet itself
    env.pop("WANDB_CONSOLE")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == '{"artifact": "org--run--checkpoint"}\n'


def test_wandb_failure_raises_wandb_error(wandb_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Honest failure: online mode against a closed local port, with a short init timeout (W&B
    # retries the refused connection until then: the tests' backoff cap).
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WANDB_API_KEY", FAKE_WANDB_KEY)
    start = time.monotonic()
    with pytest.raises(WandbError) as info:
        log_pointer(HANDLE, project="ckpt-tests", init_timeout=RETRY_MAX_DELAY)
    elapsed = time.monotonic() - start
    assert elapsed < 30
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("W&B run init failed")
    assert FAKE_WANDB_KEY not in msg
    assert isinstance(info.value, CkptError) and info.value.exit_code == 1


# --------------------------------------------------------------------------- naming / input


@pytest.mark.parametrize(
    ("repo", "subfolder", "name"),
    [
        ("org/run", "checkpoint-5", "org--run--checkpoint"),
        ("org/run", "sft", "org--run--sft"),
        ("Org.X/run_1", "a/b/checkpoint-9", "Org.X--run_1--a--b--checkpoint"),
        ("org/run", "weird name+1", "org--run--weird-name-1"),
    ],
)
def test_default_artifact_name(repo: str, subfolder: str, name: str) -> None:
    assert default_artifact_name(repo, subfolder) == name


def test_default_artifact_name_long_is_cut() -> None:
    name = default_artifact_name("org/run", "x" * 300)
    assert len(name) == 128
    assert name != default_artifact_name("org/run", "x" * 301)


@pytest.mark.parametrize("bad", ["", "has/slash", "ent:alias", "x" * 129, "sp ace"])
def test_bad_artifact_name_is_input_error(bad: str) -> None:
    with pytest.raises(InputError):
        log_pointer(HANDLE, project="p", artifact_name=bad)


def test_extra_cannot_override_core_keys() -> None:
    with pytest.raises(InputError, match="revision"):
        pointer_payload(HANDLE, {"revision": "b" * 40})


# --------------------------------------------------------------------------- read_pointer


def _good() -> dict[str, Any]:
    return dict(HANDLE.to_dict())


def test_read_pointer_variants(tmp_path: Path) -> None:
    legacy = {"repo_id": "org/run", "subfolder": "checkpoint-3", "revision": REV}
    assert read_pointer_from_json(tmp_path, legacy) == CheckpointHandle(
        "org/run", "checkpoint-3", REV, 3, DEFAULT_ENDPOINT
    )
    prefixed = CheckpointHandle("org/run", "sft", REV, None, "https://hub.example:8443/mirror")
    assert read_pointer_from_json(tmp_path, prefixed.to_dict()) == prefixed
    assert read_pointer_from_json(tmp_path, {**_good(), "extra": [1]}) == HANDLE


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda d: "not json{", "valid JSON"),
        (lambda d: [d], "JSON object"),
        (lambda d: {**d, "repo": "norepo"}, "repo"),
        (lambda d: {**d, "repo": "org/a--b"}, "repo"),
        (lambda d: {**d, "revision": "abc123"}, "40-hex"),
        (lambda d: {**d, "revision": REV.upper()}, "40-hex"),
        (lambda d: {**d, "subfolder": "../etc"}, "subfolder"),
        (lambda d: {**d, "subfolder": "/abs"}, "subfolder"),
        (lambda d: {**d, "subfolder": ""}, "subfolder"),
        (lambda d: {**d, "step": "5"}, "step"),
        (lambda d: {**d, "step": True}, "step"),
        (lambda d: {**d, "step": 7}, "disagrees"),
        (lambda d: {**d, "subfolder": "a/.git/b"}, "reserved"),
        (lambda d: {**d, "hub_url": "http://127.0.0.1:8000/other/run/tree/x/y"}, "does not match"),
        (lambda d: {**d, "hub_url": d["hub_url"].replace("http://", "http://u:tok@")}, "credentials"),
        (lambda d: {**d, "hub_url": d["hub_url"].replace("http://", "ftp://")}, "http"),
    ],
)
def test_read_pointer_rejects(tmp_path: Path, mutate: Any, why: str) -> None:
    obj = mutate(_good())
    p = tmp_path / "checkpoint.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    with pytest.raises(InputError, match=why) as info:
        read_pointer(p)
    assert "\n" not in str(info.value)


def test_read_pointer_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_pointer(tmp_path)  # a directory without checkpoint.json


# --------------------------------------------------------------------------- online-only


def test_disabled_mode_is_an_error_not_a_silent_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    with pytest.raises(WandbError, match="disabled"):
        log_pointer(HANDLE, project="p")


def test_fetch_pointer_needs_online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(WandbError, match="needs W&B reachable"):
        fetch_pointer("ent/proj/org--run--checkpoint:latest", timeout=5)
    with pytest.raises(InputError):
        fetch_pointer("not-a-ref", timeout=5)


def test_link_to_registry_needs_online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(WandbError, match=r"^W&B registry linking needs online mode$"):
        link_to_registry("ent/proj/org--run--checkpoint:step-5", "wandb-registry-model/run", project="p")
    with pytest.raises(InputError):
        link_to_registry("ent/proj/a:latest", "not-a-registry/x", project="p")
