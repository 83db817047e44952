"""`ckpt-action watch ... -- python SCRIPT` as a whole process around each framework's real
library, against a local Hub started as its own process: the transformers Trainer, accelerate's
``save_state``, torch DCP, PyTorch Lightning's ``ModelCheckpoint`` and Orbax's
``CheckpointManager``. Each script (tests/helpers/watch_<framework>_script.py) trains a tiny
model on the CPU, saves twice, and is killed (``os._exit(3)``) in the middle of its third save:
the two complete checkpoints are on the Hub (``latest`` answers the newer, ``pull`` brings its
bytes back), the half-written one is never pushed, and the watch exits with the training's
status. A framework whose library is absent skips, naming what installs it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENTRYPOINT
from tests.helpers.localhub_fixtures import make_hub_env

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
TRANSFORMERS = "the transformers extra (requirements-transformers.lock)"
FRAMEWORKS = "the frameworks lock (requirements-frameworks.lock)"


class Case:
    def __init__(self, needs: tuple[str, ...], installed_by: str, options: list[str], pushed: list[str],
                 incomplete: list[str], *, subdir: str = "") -> None:
        self.needs, self.installed_by, self.options = needs, installed_by, options
        self.pushed, self.incomplete, self.subdir = pushed, incomplete, subdir


CASES = {
    "trainer": Case(("transformers", "torch"), TRANSFORMERS, [], ["checkpoint-2", "checkpoint-4"],
                    ["checkpoint-6"]),
    "accelerate": Case(("accelerate", "torch"), TRANSFORMERS, [], ["checkpoint_0", "checkpoint_1"],
                       ["checkpoint_2"], subdir="checkpoints"),
    "dcp": Case(("torch",), TRANSFORMERS, ["--pattern", r"step_(\d+)"], ["step_1", "step_2"], ["step_3"]),
    "lightning": Case(("lightning", "torch"), FRAMEWORKS, ["--format", "lightning"],
                      ["epoch=0-step=2.ckpt", "epoch=0-step=4.ckpt"], ["epoch=0-step=6.ckpt"]),
    # Orbax's interrupted save stays under its tmp name: never pushed, reported as incomplete.
    "orbax": Case(("orbax", "jax"), FRAMEWORKS, ["--format", "orbax"], ["1", "2"], ["3.orbax-checkpoint-tmp"]),
}


@pytest.mark.parametrize("framework", list(CASES))
def test_watch_around_the_real_framework_pushes_each_complete_save_and_never_the_one_killed_half_way(
        hub_server, tmp_path, framework):
    case = CASES[framework]
    absent = [m for m in case.needs if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"needs {', '.join(absent)}: {case.installed_by}")
    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    repo = f"me/watched-{framework}"
    target = tmp_path / "out"
    local_dir = target / case.subdir if case.subdir else target
    run = subprocess.run([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(local_dir), "--repo", repo,
                          "--json", *case.options, "--", sys.executable,
                          str(HELPERS / f"watch_{framework}_script.py"), str(target)],
                         env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 3, run.stderr[-3000:]  # the training's own status: killed mid-save
    report = json.loads(run.stdout)
    assert report["framework"] == framework, report
    assert report["command_status"] == 3
    assert [p["name"] for p in report["pushed"]] == case.pushed, (report, run.stderr[-3000:])
    assert report["incomplete"] == case.incomplete and not report["failed"] and not report["left"], report

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ENTRYPOINT), *args], env=env, capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    newest = report["pushed"][-1]
    latest = cli("latest", "--repo", repo, "--json")
    assert latest.returncode == 0, latest.stderr
    assert json.loads(latest.stdout)["subfolder"] == newest["subfolder"]
    back = tmp_path / "back"
    pulled = cli("pull", "--repo", repo, "--latest", "--local-dir", str(back))
    assert pulled.returncode == 0, pulled.stderr
    source = local_dir / newest["name"]
    want = ({source.name: source.read_bytes()} if source.is_file() else
            {p.relative_to(source).as_posix(): p.read_bytes() for p in source.rglob("*") if p.is_file()})
    got = {p.relative_to(back).as_posix(): p.read_bytes() for p in back.rglob("*")
           if p.is_file() and p.name not in ("ckpt-manifest.json", ".ckpt-pull.json")}
    assert got == want
