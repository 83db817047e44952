"""The site's reference pages are the code's facts: `scripts/docs_reference.py --check` (which
.ci/run runs on the tree) fails, naming the page, when one drifts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "docs_reference.py"


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "scripts" / "docs_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)


def test_a_drifted_page_fails_the_check(tmp_path):
    # A copy of what the script reads, with one page edited by hand.
    for part in ("scripts", "ckpt_action", "docs"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "action.yml", tmp_path / "action.yml")
    page = tmp_path / "docs" / "reference" / "settings.md"
    page.write_text(page.read_text(encoding="utf-8").replace("`CKPT_", "`CKPT_OLD_", 1), encoding="utf-8")
    proc = _check(tmp_path)
    assert proc.returncode == 1 and "docs/reference/settings.md" in proc.stderr, proc
    assert "docs_reference.py" in proc.stderr
