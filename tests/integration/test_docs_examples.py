"""The code examples of the README and the site that run as written (marked ``runs:``, see
tests/helpers/docblocks.py): the Python API snippet against the in-process local Hub, the demo
through the CLI."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_localhub import LocalHub
from tests.helpers.docblocks import block


@pytest.mark.parametrize("page", ["README.md", "docs/guides/python.md"])
def test_the_python_api_snippet_runs_as_written(page: str, local_hub: LocalHub, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    code = block(page, "python-api")
    for name in list(os.environ):
        if name.startswith(("CKPT_", "WANDB_", "HF_TOKEN")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_ENDPOINT", local_hub.url)
    monkeypatch.chdir(tmp_path)
    for folder in ("out/checkpoint-300", "out/sft"):  # what the training script saved
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "model.safetensors").write_bytes(folder.encode() * 1000)
    scope: dict[str, object] = {}
    exec(compile(code, f"{page}:python-api", "exec"), scope)  # noqa: S102  # the page's own text
    h, found, path = scope["h"], scope["found"], scope["path"]
    assert isinstance(h, ckpt.CheckpointHandle) and isinstance(found, ckpt.CheckpointHandle)
    assert (found.subfolder, found.step) == (h.subfolder, h.step) == ("checkpoint-300", 300)
    assert (Path(str(path)) / "model.safetensors").read_bytes() == b"out/checkpoint-300" * 1000
    assert (tmp_path / "sft" / "model.safetensors").read_bytes() == b"out/sft" * 1000


def test_the_getting_started_demo_runs_as_written(cli) -> None:
    words = shlex.split(block("docs/getting-started.md", "demo"))
    assert words[0] == "ckpt-action"
    run = cli(*words[1:], timeout=180)
    assert run.code == 0, run.stderr
    assert "latest -> checkpoint-300" in run.stdout and "identical" in run.stdout
