"""``pip install .`` gives a working ``ckpt-action`` command, outside the checkout; the local
Hub (the demo's server) is a distribution of its own, ``pip install ./packages/ckpt-localhub``.

The distributions are built once (``dists``, as release.yml builds them) and every test
installs those: the tests of this module run on one worker (``xdist_group``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.xdist_group("packaging")  # the distributions built once, on one worker


# The release's distributions, built once for the tests below as release.yml builds them.
@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    for source in (ROOT, ROOT / "packages" / "ckpt-localhub"):
        build = subprocess.run([sys.executable, "-m", "build", "-o", str(out), str(source)],
                               capture_output=True, text=True, cwd=out, timeout=600)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def _wheels(dists: Path) -> list[Path]:
    from ckpt_action.version import __version__

    return [dists / f"ckpt_action-{__version__}-py3-none-any.whl",
            dists / f"ckpt_action_localhub-{__version__}-py3-none-any.whl"]


def _requires(wheel: Path, extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions ``wheel`` requires (its METADATA's Requires-Dist): without an extra,
    or for ``extras`` only."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(name).decode()
    lines = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    if extras:
        lines = [line for line in lines if any(f'extra == "{extra}"' in line for extra in extras)]
    else:
        lines = [line for line in lines if "extra ==" not in line]
    return {re.split(r"[ ;<>=!~\[]", line.split(":", 1)[1].strip())[0].lower() for line in lines}


@pytest.mark.slow
def test_the_built_package_runs_as_a_console_script_outside_the_checkout(tmp_path, dists):
    wheel, server_wheel = _wheels(dists)
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
    # environment may have it, editable (as .ci/run installs it) or not (the README's Quickstart):
    # -S drops what .pth files add, and the path holds the installed ckpt-action and a dir of links
    # to everything else in this environment's site-packages (its dependencies: click, ...).
    deps = tmp_path / "deps"
    deps.mkdir()
    for site in [Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]:
        for entry in site.iterdir():
            if not entry.name.startswith(("ckpt_localhub", "ckpt_action")) and not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    bare_env = env | {"PYTHONPATH": os.pathsep.join([str(target), str(deps)])}
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


def test_the_release_distributions_pass_twine_check_and_hold_exactly_their_packages(dists):
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dists.iterdir()))],
                           capture_output=True, text=True, timeout=300)
    assert twine.returncode == 0 and twine.stdout.count("PASSED") == 4, twine.stdout + twine.stderr
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_dist.py"), str(dists)],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr


# Installed into a fresh venv by hard links to this environment's copy (pip then takes it as
# installed, as for a user who has it already) rather than unpacked anew: torch is about 770 MB
# in 15 000 files, two minutes of the test on a 2-core machine, and its wheel is not ours.
_LINKED = ("torch",)


def _link_installed(name: str, site: Path) -> None:
    """``name``'s installed files (its packages and dist-info) hard-linked into ``site``, a copy
    where a link cannot be made; nothing if it is not installed here (pip installs it). Never a
    symlink: a pip that replaced it would delete through one, in this environment."""
    import importlib.metadata
    import shutil

    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return
    source = Path(str(dist.locate_file("")))
    tops = {Path(str(f)).parts[0] for f in dist.files or () if Path(str(f)).parts[0] != ".."}

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for top in tops:
        if (source / top).is_dir():
            shutil.copytree(source / top, site / top, copy_function=link, symlinks=True)
        else:
            link(str(source / top), str(site / top))


def _fresh_venv_demo(tmp_path: Path, dists: Path, extras: str) -> Path:
    """A new venv (nothing of this one but what ``_LINKED`` names, when an extra asks for it),
    the built wheel with ``extras`` installed from the wheels and the package index, and
    `ckpt-action demo` run from it, outside the checkout."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    ckpt_wheel, server_wheel = _wheels(dists)
    (site,) = (venv / "lib").glob("python*/site-packages")
    for name in set(_LINKED) & _requires(ckpt_wheel, tuple(extras.split(","))):
        _link_installed(name, site)
    # The server's wheel beside it: pip takes it for the demo extra's ckpt-action-localhub pin.
    # --no-compile: Python compiles what the run imports; pip would compile every module of
    # every package (a third of the install).
    # Without this checkout on PYTHONPATH: pip would take its ckpt_action.egg-info (an editable
    # install's) for the package installed already, and install no console script.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile",
                              f"{ckpt_wheel}[{extras}]", str(server_wheel)],
                             env=env, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-3000:]
    demo = subprocess.run([str(venv / "bin" / "ckpt-action"), "demo"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "pulled bytes are identical" in demo.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import ckpt_action, ckpt_localhub; "
                            "print(ckpt_action.__file__); print(ckpt_localhub.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert all(line.startswith(str(venv)) for line in where.stdout.splitlines()), where
    return venv


def test_the_built_wheel_with_the_demo_extra_runs_the_demo_in_a_fresh_venv(tmp_path, dists):
    _fresh_venv_demo(tmp_path, dists, "demo")


@pytest.mark.slow
def test_the_built_wheel_with_the_transformers_and_signing_extras_in_a_fresh_venv(tmp_path, dists):
    # About a minute (transformers, the signing stack into a new venv; torch linked): marked slow.
    venv = _fresh_venv_demo(tmp_path, dists, "demo,transformers,signing")
    imports = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import ckpt_action.integrations.transformers, model_signing, torch"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert imports.returncode == 0, imports.stderr[-3000:]
