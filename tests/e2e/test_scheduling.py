"""How ``python -m pytest -n 2`` schedules (the root conftest.py): the tests of one
``xdist_group`` run on one worker, so what they share is made once (the packaging tests'
build, the act host-mode tests' native venv), unless the caller chose a ``--dist``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A project of its own whose conftest is the checkout's root conftest.py, with a group of four
# tests beside four others: each records the worker it ran on.
CONFTEST = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("ckpt_root_conftest", {str(ROOT / "conftest.py")!r})
root = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root)
pytest_configure = root.pytest_configure
"""
TESTS = """
import os, time
import pytest

def record(name):
    with open(os.environ["RECORD"], "a") as fh:
        fh.write(f"{name} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    time.sleep(0.2)
    record(f"grouped-{n}")

@pytest.mark.parametrize("n", range(4))
def test_alone(n):
    time.sleep(0.2)
    record(f"alone-{n}")
"""


def _runs(tmp_path: Path, *args: str) -> list[tuple[str, str]]:
    """(test, worker) of every test run by ``pytest -n 2 ARGS`` in the project above."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sched.py").write_text(TESTS)
    record = tmp_path / "record.txt"
    record.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))} | {
        "RECORD": str(record)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", *args],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [(name, worker) for name, worker in (line.split() for line in record.read_text().splitlines())]


def test_with_n_the_tests_of_a_group_run_on_one_worker_and_the_others_on_both(tmp_path: Path) -> None:
    ran = dict(_runs(tmp_path))
    assert len(ran) == 8, ran
    assert len({ran[f"grouped-{n}"] for n in range(4)}) == 1, ran
    assert set(ran.values()) == {"gw0", "gw1"}, ran


def test_a_dist_the_caller_chose_is_kept(tmp_path: Path) -> None:
    # --dist load hands the first tests out two by two: the group's four land on both workers.
    ran = dict(_runs(tmp_path, "--dist", "load"))
    assert len(ran) == 8 and len({ran[f"grouped-{n}"] for n in range(4)}) == 2, ran
