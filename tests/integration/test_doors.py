"""One core, two doors (three with the action): the same checks and results, each door
naming the parameter as its users know it (``--tag``, ``tag=``, ``input 'tag'``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.client import Client
from ckpt_localhub import LocalHub
from tests.conftest import clean_env, write_checkpoint

BAD_TAG = ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release", "--tag", "bad tag"]


def test_python_names_the_keyword():
    with pytest.raises(ckpt.InputError) as caught:
        ckpt.promote("o/r", "release", subfolder="checkpoint-1", tag="bad tag", endpoint="http://127.0.0.1:9")
    assert str(caught.value).startswith("tag='bad tag' is not"), caught.value
    assert "--" not in str(caught.value)
    assert caught.value.param == "tag"


def test_the_command_line_names_the_flag(cli_in_process, tmp_path):
    run = cli_in_process(*BAD_TAG, HF_ENDPOINT="http://127.0.0.1:9")
    assert run.code == 2
    assert run.stderr.startswith("error: --tag 'bad tag' is not"), run.stderr


def _action_env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", GITHUB_WORKSPACE=str(tmp_path))
    env.update({"INPUT_" + k.upper(): v for k, v in inputs.items()})
    return env


def test_the_action_names_the_input(cli_in_process, tmp_path):
    env = _action_env(tmp_path, mode="promote", repo="o/r", subfolder="checkpoint-1", to="release", tag="bad tag")
    run = cli_in_process("from-action", env=env)
    assert run.code == 2
    error = run.stderr.strip().splitlines()[-1]
    assert error.startswith("error: input 'tag' 'bad tag' is not"), run.stderr
    assert "--tag" not in error


@pytest.mark.parametrize(("inputs", "said"), [
    ({"mode": "push", "repo": "o/r", "local-dir": "ckpt", "step": "abc"}, "input 'step' must be a whole number"),
    ({"mode": "prune", "repo": "o/r", "keep-last": "two"}, "input 'keep-last' must be a whole number"),
    ({"mode": "latest", "repo": "o/r", "timeout": "soon"}, "input 'timeout' must be a number"),
    *[({"mode": mode, "repo": "o/r", name: value, **extra}, f"input '{name}' must be a whole number")
      for mode, name, extra in (("prune", "keep-last", {}), ("prune", "keep-every", {}), ("latest", "retries", {}),
                                ("latest", "verify-min-step", {}), ("push", "step", {"local-dir": "ckpt"}))
      for value in ("\u00b2", "\u0663", "9" * 5000)],
    *[({"mode": "prune", "repo": "o/r", "keep-best": f"eval_loss:min:{value}"}, "input 'keep-best' 'eval_loss:min:")
      for value in ("\u00b2", "\u0663", "9" * 5000)],
    ({"mode": "promote", "repo": "o/r", "subfolder": "checkpoint-1", "to": "r", "as-model": "true",
      "max-shard-size": "\u0663GB"}, "input 'max-shard-size' '\\u0663GB' is not a size"),
])
def test_the_action_names_the_input_click_refused(cli_in_process, tmp_path, inputs, said):
    write_checkpoint(tmp_path / "ckpt", {"w.bin": b"w"})
    env = _action_env(tmp_path, **{k.replace("-", "_"): v for k, v in inputs.items()})
    run = cli_in_process("from-action", env=env)
    assert run.code == 2, run.stderr
    error = run.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: {said}"), run.stderr
    assert "Invalid value" not in error and "--" not in error


@pytest.fixture
def hub(tmp_path: Path, hf_client: Path, monkeypatch: pytest.MonkeyPatch):
    for name in [k for k in os.environ if k.startswith(("CKPT_", "WANDB_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CKPT_RETRY_DELAY", "0.05")
    with LocalHub(tmp_path / "hub") as served:
        yield served


def test_the_api_answers_every_field_the_cli_prints(hub, tmp_path):
    src = write_checkpoint(tmp_path / "out", {"w.bin": b"w" * 1000, "config.json": b"{}"})
    api = Client(hub.url)
    pushed = api.push(src, "o/r", step=4)
    assert (pushed.commits, pushed.uploaded_files, pushed.deleted_files, pushed.local_dir) == (1, 2, 0, src)
    again = api.push(src, "o/r", step=4)
    assert (again.commits, again.uploaded_files, again.handle) == (0, 0, pushed.handle)

    first = api.pull("o/r", tmp_path / "resume", latest=True)
    assert (first.handle, first.files, first.downloaded_files) == (pushed.handle, 2, 2)
    second = api.pull(pushed.handle, tmp_path / "resume")
    assert (second.downloaded_files, second.reused_files) == (0, 2)

    promoted = api.promote(pushed.handle, "release", tag="v1")
    assert (promoted.source, promoted.tag, promoted.commits) == (pushed.handle, "v1", 1)

    listed = api.list("o/r")
    assert listed.revision == promoted.handle.revision
    assert [i.subfolder for i in listed.checkpoints] == ["checkpoint-4", "release"]
    pruned = ckpt.prune("o/r", keep_last=1, dry_run=True, endpoint=hub.url)
    assert (pruned.repo, pruned.deleted, list(pruned.kept)) == ("o/r", [], ["checkpoint-4"])


def test_the_api_pulls_from_a_pointer_file_or_dict(hub, tmp_path):
    from ckpt_action.wandb.format import pointer_payload

    src = write_checkpoint(tmp_path / "out", {"w.bin": b"w" * 10})
    handle = ckpt.push(src, repo="o/r", step=2, endpoint=hub.url)
    payload = pointer_payload(handle)
    path = ckpt.pull(local_dir=tmp_path / "from-dict", pointer=payload, endpoint=hub.url)
    assert (path / "w.bin").read_bytes() == b"w" * 10
    (tmp_path / "art").mkdir()
    (tmp_path / "art" / "checkpoint.json").write_text(__import__("json").dumps(payload))
    path = ckpt.pull(local_dir=tmp_path / "from-file", pointer=tmp_path / "art", endpoint=hub.url)
    assert (path / "w.bin").read_bytes() == b"w" * 10


def test_the_api_refuses_a_pointer_to_another_host_as_the_cli_does(hub, tmp_path):
    from ckpt_action.wandb.format import pointer_payload

    elsewhere = ckpt.CheckpointHandle("o/r", "checkpoint-2", "a" * 40, 2, "https://evil.example")
    with pytest.raises(ckpt.InputError) as caught:
        ckpt.pull(local_dir=tmp_path / "x", pointer=pointer_payload(elsewhere), endpoint=hub.url, token="hf_secret")
    assert "endpoint=" in str(caught.value) and "evil.example" in str(caught.value)
    assert hub.url and not (tmp_path / "x").exists()


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 5000], ids=["superscript", "arabic-indic", "digits"])
def test_python_names_the_keyword_of_a_count(value):
    """A count given to the Python door as text is refused naming the keyword, never taken as
    its digits' value ('\u0663' is 3 to ``int``) nor an unexpected ValueError."""
    calls = {
        "keep_best=": lambda: ckpt.prune("o/r", None, keep_best=f"eval_loss:min:{value}", endpoint="http://127.0.0.1:9"),
        "keep_last=": lambda: ckpt.prune("o/r", value, endpoint="http://127.0.0.1:9"),
        "max_shard_size=": lambda: ckpt.promote("o/r", "r", subfolder="checkpoint-1", as_model=True,
                                                max_shard_size=value + "GB", endpoint="http://127.0.0.1:9"),
    }
    for spelled, call in calls.items():
        with pytest.raises(ckpt.InputError) as caught:
            call()
        assert str(caught.value).startswith(spelled), caught.value
        assert "ValueError" not in str(caught.value) and "--" not in str(caught.value)
