"""``pip install .`` gives a working ``ckpt-action`` command, outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_built_package_runs_as_a_console_script_outside_the_checkout(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels),
                            str(ROOT)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("ckpt_action-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                              str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    # The installed copy, not the checkout: the checkout is nowhere on the path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    script = target / "bin" / "ckpt-action"
    where = subprocess.run([sys.executable, "-c", "import ckpt_action, sys; print(ckpt_action.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True)
    assert where.stdout.startswith(str(target)), where
    assert (target / "ckpt_action" / "py.typed").exists()
    version = subprocess.run([str(script), "--version"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert version.returncode == 0 and "ckpt-action, version" in version.stdout, version
    demo = subprocess.run([str(script), "demo"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "pulled bytes are identical" in demo.stdout
