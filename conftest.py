"""Collection for the doctests of the package (``--doctest-modules``).

The transformers integration is an optional extra: without it installed, its module
cannot be imported, so its doctests are not collected (its tests skip, saying why).
"""

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

collect_ignore = [] if importlib.util.find_spec("transformers") else ["ckpt_action/integrations/transformers.py"]


# --------------------------------------------------------------------------- doctest fixtures
# The docstring examples run for real: every doctest gets a scratch dir as its working dir
# (``scratch``), and those of the modules that talk to a Hub a local Hub started for them
# (HF_ENDPOINT points at it) holding ``org/run`` with checkpoint-200 and checkpoint-300,
# plus ``out/checkpoint-300`` and ``out/sft`` to push. Names the examples use are in the
# doctest namespace: ``ckpt``, ``Path``, ``settings``, ``found`` (latest), ``sha`` (its SHA).

_HUB_MODULES = ("ckpt_action.api", "ckpt_action.ops.", "ckpt_action.hub.", "ckpt_action.disk.",
                "ckpt_action.integrations.")


@pytest.fixture(autouse=True)
def _doctest_environment(request: pytest.FixtureRequest) -> Iterator[None]:
    from _pytest.doctest import DoctestItem

    if not isinstance(request.node, DoctestItem):
        yield
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    namespace: dict[str, Any] = request.getfixturevalue("doctest_namespace")
    for name in list(os.environ):
        if name.startswith(("HF_", "HUGGINGFACE_", "CKPT_", "WANDB_", "GITHUB_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    namespace.update(scratch=scratch, Path=Path)
    if not request.node.name.startswith(_HUB_MODULES):
        yield
        return
    import ckpt_action as ckpt
    from ckpt_action.settings import Settings
    from ckpt_localhub import LocalHub

    for rel, data in {"out/checkpoint-200/model.safetensors": b"w200", "out/checkpoint-300/model.safetensors": b"w300",
                      "out/checkpoint-300/config.json": b'{"step": 300}', "out/sft/model.safetensors": b"sft"}.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_bytes(data)
    with LocalHub(tmp_path / "hub") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        ckpt.push(scratch / "out" / "checkpoint-200", "org/run", step=200)
        found = ckpt.push(scratch / "out" / "checkpoint-300", "org/run", step=300)
        namespace.update(ckpt=ckpt, hub=hub, settings=Settings.from_env(), found=found, sha=found.revision)
        yield
