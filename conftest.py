"""Collection for the doctests of the package (``--doctest-modules``), and how ``-n`` schedules.

The Trainer callback and the DCP storage are optional extras: without one installed, the
modules that import it at the top cannot be imported, so they are not collected but reported
as skipped, naming the extra (the test modules of the extras skip themselves the same way,
with ``pytest.importorskip``).
"""

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# --------------------------------------------------------------------------- optional extras
# Every .py file under testpaths is imported for its doctests, the torchrun scripts of the
# tests included: those that import an extra's packages at the top, with the extra they need.
_TRANSFORMERS = (("transformers", "torch"), "[transformers]")
_DISTRIBUTED = (("torch",), "[distributed]")
_NEEDS_EXTRA = {
    "ckpt_action/integrations/transformers.py": _TRANSFORMERS,
    "ckpt_action/integrations/dcp.py": _DISTRIBUTED,
    "tests/helpers/dist_trainer_script.py": _TRANSFORMERS,
    "tests/helpers/dist_dcp_script.py": _DISTRIBUTED,
    "tests/helpers/dist_push_script.py": _DISTRIBUTED,
    "tests/helpers/ranks_bucket_push.py": _DISTRIBUTED,
}
_ROOT = Path(__file__).resolve().parent


def _missing_extra(file_path: Path) -> str | None:
    """Why ``file_path`` cannot be collected here (an extra it needs is not installed), or None."""
    try:
        rel = file_path.resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        return None
    if rel not in _NEEDS_EXTRA:
        return None
    modules, extra = _NEEDS_EXTRA[rel]
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return f"{rel} needs {' and '.join(absent)}, not installed (the {extra} extra: pip install '.{extra}')"


class _NeedsExtra(pytest.File):
    """A module that needs an absent extra: collected as one skip saying which."""

    reason = ""

    def collect(self) -> Iterator[pytest.Item]:
        pytest.skip(self.reason)
        yield from ()


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Iterator[None]:
    collected = yield
    reason = _missing_extra(file_path)
    if reason is None:
        return collected
    skipped = _NeedsExtra.from_parent(parent, path=file_path)
    skipped.reason = reason
    return [skipped]


# --------------------------------------------------------------------------- scheduling
# With -n (pytest-xdist) and no --dist of the caller's, the tests are scheduled as with
# --dist loadgroup: the tests of one ``@pytest.mark.xdist_group`` run on one worker, groups
# first, so what they share is made once (the packaging tests' build, the act host-mode tests'
# native venv); every other test is handed out one at a time, in collection order (tests/e2e/,
# the longest, first). Not an addopts flag: a run with ``-p no:xdist`` would not know it.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if any(arg == "-d" or arg.startswith(("--dist", "--loadscope", "--loadfile", "--loadgroup"))
           for arg in config.invocation_params.args):
        return
    if hasattr(config, "workerinput"):  # a worker: it names each test's group for the controller
        config.option.loadgroup = True
    elif getattr(config.option, "dist", "no") == "load":  # the controller, -n given
        config.option.dist = "loadgroup"


# --------------------------------------------------------------------------- bytecode
# The suite starts hundreds of child processes (the CLI, the local Hub, torchrun's ranks) that
# import this checkout's modules. Where PYTHONDONTWRITEBYTECODE is set (these machines set it)
# no import writes bytecode, so each child compiled every module it imports again: about
# 0.07 s of CPU a process. The controller compiles them once before any test, as an import
# without that variable would have (the __pycache__ dirs are git-ignored; the distributions
# and the image never take them).
def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    import compileall

    root = Path(__file__).parent
    for package in (root / "ckpt_action", root / "packages" / "ckpt-localhub" / "ckpt_localhub",
                    root / "tests" / "helpers", root / "bench"):
        if package.is_dir():
            compileall.compile_dir(package, quiet=2)


# --------------------------------------------------------------------------- doctest fixtures
# The docstring examples run for real: every doctest gets a scratch dir as its working dir
# (``scratch``) holding ``out/checkpoint-300`` and ``out/sft`` to push. Those of the modules
# that talk to a Hub, when their examples name a Hub's things (``_NEEDS_HUB``), share one
# local Hub per module (HF_ENDPOINT points at it), started and seeded by the first of them:
# ``org/run`` with checkpoint-200 and checkpoint-300. The others of those modules get an
# endpoint where nothing listens, so an example that does reach for a Hub fails here rather
# than going anywhere. Names the examples use are in the doctest namespace: ``ckpt``,
# ``Path``, ``settings``, ``found`` (latest at seeding), ``sha`` (its SHA), ``hub``.
# The examples of a module run in their order against its Hub: each example reads only what
# the seeding put there or what it wrote itself.

_HUB_MODULES = ("ckpt_action.api", "ckpt_action.ops.", "ckpt_action.stores.", "ckpt_action.disk.",
                "ckpt_action.integrations.")
_NEEDS_HUB = ("hub", "found", "sha", "settings", "ckpt.", "org/", "HF_ENDPOINT", "RemoteRepo", "resume_from_hub",
              "CheckpointCallback")
_NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens, a request fails at once
_SCRATCH = {"out/checkpoint-200/model.safetensors": b"w200", "out/checkpoint-300/model.safetensors": b"w300",
            "out/checkpoint-300/config.json": b'{"step": 300}', "out/sft/model.safetensors": b"sft"}


def _write_scratch(root: Path) -> None:
    for rel, data in _SCRATCH.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


@pytest.fixture(scope="module")
def _doctest_module_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The module's shared local Hub, filled in by the first doctest that needs it."""
    shared: dict[str, Any] = {"base": tmp_path_factory.mktemp("doctest-hub")}
    yield shared
    if "hub" in shared:
        shared["hub"].stop()


def _seeded_hub(shared: dict[str, Any]) -> dict[str, Any]:
    if "hub" not in shared:
        import ckpt_action as ckpt
        from ckpt_localhub import LocalHub

        base: Path = shared["base"]
        _write_scratch(base / "seed")
        hub = LocalHub(base / "hub")
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("HF_ENDPOINT", hub.url)
                patch.setenv("HF_HOME", str(base / "hf-home"))
                ckpt.push(base / "seed" / "out" / "checkpoint-200", "org/run", step=200)
                found = ckpt.push(base / "seed" / "out" / "checkpoint-300", "org/run", step=300)
        except BaseException:
            hub.stop()
            raise
        shared.update(hub=hub, found=found)
    return shared


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
    _write_scratch(scratch)
    source = "".join(example.source for example in request.node.dtest.examples)
    if not any(word in source for word in _NEEDS_HUB):
        monkeypatch.setenv("HF_ENDPOINT", _NOWHERE)
        yield
        return
    import ckpt_action as ckpt
    from ckpt_action.settings import Settings

    shared = _seeded_hub(request.getfixturevalue("_doctest_module_hub"))
    monkeypatch.setenv("HF_ENDPOINT", shared["hub"].url)
    found = shared["found"]
    namespace.update(ckpt=ckpt, hub=shared["hub"], settings=Settings.from_env(), found=found, sha=found.revision)
    yield
