"""The README followed literally: its Quickstart's first line in a fresh venv leaves a working
``ckpt-action`` on PATH, and its workflow examples are the runnable ones under .github/workflows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "scripts"))
import readme_tables  # noqa: E402


def quickstart_lines() -> list[str]:
    section = README.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Quickstart has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


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
    script = f"set -e\n{first}\ncommand -v ckpt-action\nckpt-action --version\n"
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "pulled bytes are identical" in proc.stdout
    where, version = proc.stdout.strip().splitlines()[-2:]
    assert Path(where) == clone / ".venv" / "bin" / "ckpt-action"
    assert version.startswith("ckpt-action, version")


def yaml_blocks(text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(1)) for m in re.finditer(r"```yaml\n(.*?)```", text, re.S)]


def test_every_workflow_example_in_the_readme_is_generated_from_a_runnable_one() -> None:
    generated = readme_tables.examples()
    assert generated, "the README shows at least one workflow from .github/workflows"
    spans = []
    for name, text in generated.items():
        start, end = readme_tables.example_markers(name)
        assert f"{start}\n{text}\n{end}" in README, f"README's copy of {name} is stale: readme_tables.py --write"
        spans.append((README.index(start), README.index(end)))
        assert (ROOT / ".github" / "workflows" / name).is_file()
    for at, block in yaml_blocks(README):
        if "ckpt-action@" in block or "jobs:" in block:
            assert any(a < at < b for a, b in spans), f"a workflow example in README.md is not a copy:\n{block}"
    # The copies say what the user's workflow says, nothing of this repository's own layout.
    for text in generated.values():
        assert "uses: ./" not in text and "uses: OWNER/ckpt-action@v1" in text
