"""The wheels the repository's lock files pin, downloaded once, for the tests that install a
lock into a fresh venv (the README's Quickstart, the docs and release workflows under act).

``pip install --require-hashes -r LOCK`` against the package index spends most of its time
asking the index about each of its 60-130 pins, the same answers every run. The wheels are
fetched once (``pip download --require-hashes``, each lock as it is) into a folder named by
the locks' hash and kept across runs (``$CKPT_TEST_WHEELHOUSE``, else the user's cache dir);
:func:`offline_pip_env` then points pip at that folder alone. The install still checks every
hash of the lock, and a pin missing from the folder still fails it: only the index is not asked.
Workers of ``-n`` share the folder: the first fills it under a file lock, the others wait.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ("requirements.lock", "packages/ckpt-localhub/requirements.lock", "requirements-dev.lock",
         "requirements-release.lock")
# What `pip install .` and `python -m build` install into their isolated build environment.
BUILD_REQUIRES = ("setuptools>=77", "wheel")


def _root() -> Path:
    given = os.environ.get("CKPT_TEST_WHEELHOUSE")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ckpt-action-tests" / "wheelhouse"


def _key() -> str:
    digest = hashlib.sha256()
    for name in (*LOCKS, *BUILD_REQUIRES):
        digest.update(name.encode() + b"\0")
        path = ROOT / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def wheelhouse() -> Path:
    """The folder holding every wheel the locks pin (and the build backend), filled if new."""
    root = _root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / _key()
    if (final / ".complete").exists():
        return final
    with open(root / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another worker may be filling it: wait for it
        if (final / ".complete").exists():
            return final
        partial = root / f"{final.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "-d", str(partial)]
        for lock in LOCKS:  # one lock at a time: each is resolved as its own install resolves it
            done = subprocess.run([*pip, "--require-hashes", "--no-deps", "-r", str(ROOT / lock)],
                                  capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise RuntimeError(f"pip download -r {lock} failed:\n{done.stderr[-3000:]}")
        done = subprocess.run([*pip, *BUILD_REQUIRES], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"pip download {' '.join(BUILD_REQUIRES)} failed:\n{done.stderr[-3000:]}")
        (partial / ".complete").write_text("")
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
    return final


def offline_pip_env() -> dict[str, str]:
    """Environment for a pip that installs from :func:`wheelhouse` only, without compiling
    every module of every package (Python compiles what a run imports)."""
    links = " ".join(p for p in (str(wheelhouse()), os.environ.get("PIP_FIND_LINKS", "")) if p)
    # PIP_NO_COMPILE takes the value of the option it negates: "0" is --no-compile ("1" compiles).
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": links, "PIP_NO_COMPILE": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
