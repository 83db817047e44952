#!/usr/bin/env python3
"""Check the release's distributions hold exactly their package, nothing of the repository else.

    python scripts/check_dist.py dist/

For each wheel in the folder: its files, outside its ``.dist-info``, are exactly the files of its
package in the checkout (``ckpt_action/`` for ckpt-action, ``packages/ckpt-localhub/ckpt_localhub/``
for ckpt-action-localhub; caches aside): no tests, no bench, no local Hub data, no other package.
For each sdist: no tests, bench, docs or ``packages/`` folder. Exit 1 with one line per stray or
missing file; release.yml runs it before anything is uploaded.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The distribution's name in a file name -> (the folder holding its package, the package).
PACKAGES = {
    "ckpt_action": (ROOT, "ckpt_action"),
    "ckpt_action_localhub": (ROOT / "packages" / "ckpt-localhub", "ckpt_localhub"),
}
SDIST_NEVER = ("tests/", "bench/", "docs/", "packages/", ".github/", ".ci/")


def package_files(base: Path, package: str) -> set[str]:
    """The package's files in the checkout, as paths inside a wheel."""
    return {p.relative_to(base).as_posix() for p in (base / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def check_wheel(wheel: Path) -> list[str]:
    dist = wheel.name.split("-")[0]
    if dist not in PACKAGES:
        return [f"{wheel.name}: not a distribution of this repository"]
    base, package = PACKAGES[dist]
    with zipfile.ZipFile(wheel) as zf:
        names = {n for n in zf.namelist() if not n.endswith("/")}
    held = {n for n in names if ".dist-info/" not in n.split("/", 1)[0] + "/"}
    expected = package_files(base, package)
    return ([f"{wheel.name}: holds {n}, which is not a file of {package}/" for n in sorted(held - expected)]
            + [f"{wheel.name}: lacks {n}" for n in sorted(expected - held)])


def check_sdist(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as tf:
        names = [m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name]
    return [f"{sdist.name}: holds {n}" for n in names if n.startswith(SDIST_NEVER)]


def check(folder: Path) -> list[str]:
    wheels, sdists = sorted(folder.glob("*.whl")), sorted(folder.glob("*.tar.gz"))
    if not wheels or not sdists:
        return [f"{folder}: expected wheels and sdists, found {len(wheels)} and {len(sdists)}"]
    return [e for w in wheels for e in check_wheel(w)] + [e for s in sdists for e in check_sdist(s)]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_dist.py DIST_DIR", file=sys.stderr)
        return 2
    errors = check(Path(argv[0]))
    for line in errors:
        print(line, file=sys.stderr)
    if not errors:
        print(f"{argv[0]}: every wheel holds exactly its package")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
