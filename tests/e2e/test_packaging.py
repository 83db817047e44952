"""``pip install .`` gives a working ``ckpt-action`` command, outside the checkout; the local
Hub (the demo's server) is a distribution of its own, ``pip install ./packages/ckpt-localhub``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _wheel(source: Path, wheels: Path, cwd: Path) -> Path:
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels),
                            str(source)], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("*.whl")
    return wheel


def _requires(wheel: Path) -> set[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(name).decode()
    return {re.split(r"[ ;<>=!~\[]", line.split(":", 1)[1].strip())[0].lower()
            for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}


@pytest.mark.slow
def test_the_built_package_runs_as_a_console_script_outside_the_checkout(tmp_path):
    wheel = _wheel(ROOT, tmp_path / "wheels", tmp_path)
    server_wheel = _wheel(ROOT / "packages" / "ckpt-localhub", tmp_path / "server-wheels", tmp_path)
    assert wheel.name.startswith("ckpt_action-") and server_wheel.name.startswith("ckpt_action_localhub-")
    # The server's dependencies are the server package's, not ckpt-action's.
    server_only = {"h11", "pyyaml", "blake3", "lz4"}
    assert server_only <= _requires(server_wheel) and not server_only & _requires(wheel), _requires(wheel)
    target = tmp_path / "site"
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
    assert not (target / "ckpt_localhub").exists() and not (target / "ckpt_action" / "localhub").exists()
    version = subprocess.run([str(script), "--version"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert version.returncode == 0 and "ckpt-action, version" in version.stdout, version
    # Without the server package, the demo says in one line what to install. The test's own
    # environment may have it (the checkout's, as .ci/run installs it): -S drops what .pth files
    # add, and the path holds only the installed ckpt-action and the site-packages of its dependencies.
    sites = [p for p in sys.path if p.endswith("site-packages") and not Path(p, "ckpt_localhub").exists()]
    bare_env = env | {"PYTHONPATH": os.pathsep.join([str(target), *sites])}
    bare = subprocess.run([sys.executable, "-S", str(script), "demo"], env=bare_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert bare.returncode == 2 and bare.stdout == "", bare
    assert len(bare.stderr.strip().splitlines()) == 1 and 'pip install "ckpt-action[demo]"' in bare.stderr
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                              str(target), str(server_wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    demo = subprocess.run([str(script), "demo"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "pulled bytes are identical" in demo.stdout
