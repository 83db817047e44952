"""The README followed literally: its Quickstart's first line in a fresh venv leaves a working
``ckpt-action`` on PATH, and the copies of the runnable workflows it and the site show are
current (tests/unit/test_docs_examples.py holds every other block)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "scripts"))
import readme_tables  # noqa: E402

from tests.helpers.docblocks import block  # noqa: E402
from tests.helpers.wheelhouse import offline_pip_env  # noqa: E402


def quickstart_lines() -> list[str]:
    section = README.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    code = block("README.md", "quickstart")
    assert code in section, "the Quickstart's block is in the Quickstart"
    return [line for line in code.splitlines() if line.strip()]


def checkout_copy(dest: Path) -> Path:
    """The files a fresh clone has (tracked ones), without the build leftovers of this tree."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    names = [n for n in listed.stdout.decode().split("\0") if n] if listed.returncode == 0 else []
    if not names:  # not a git checkout (an sdist): everything but caches and venvs
        names = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()
                 and not {".venv", ".git", "__pycache__", "build"} & set(p.relative_to(ROOT).parts)]
    for name in names:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def test_the_quickstart_first_line_leaves_ckpt_action_on_path_in_a_fresh_venv(tmp_path: Path) -> None:
    first, second = quickstart_lines()[:2]
    assert "venv" in first and "--require-hashes -r requirements.lock" in first and first.endswith("ckpt-action demo")
    assert "pytest" in second
    clone = checkout_copy(tmp_path / "clone")
    # A shell as a newcomer has it: no venv active, nothing of this test run's environment.
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != Path(sys.executable).parent.resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "CKPT_", "GITHUB_", "VIRTUAL_ENV",
                                                                       "PYTHON", "WANDB_"))}
    env |= {"PATH": path, "HOME": os.environ.get("HOME", str(tmp_path))}  # pip's cache dir is reused
    # The pins' wheels from the test wheelhouse rather than the index: the same files, every hash checked.
    env |= offline_pip_env()
    script = f"set -e\n{first}\ncommand -v ckpt-action\nckpt-action --version\n"
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "pulled bytes are identical" in proc.stdout
    where, version = proc.stdout.strip().splitlines()[-2:]
    assert Path(where) == clone / ".venv" / "bin" / "ckpt-action"
    assert version.startswith("ckpt-action, version")


def test_every_workflow_copy_on_the_readme_and_the_site_is_current() -> None:
    assert readme_tables.main(["--check"]) == 0, "run: python scripts/readme_tables.py --write"
    assert "example:example-resume.yml" in readme_tables.PAGES["README.md"]
    for page, keys in readme_tables.PAGES.items():
        text = (ROOT / page).read_text(encoding="utf-8")
        for key in keys:
            start, end = readme_tables.markers_of(key)
            assert f"{start}\n{readme_tables.generated(key)}\n{end}" in text, f"{page}'s copy of {key} is stale"
