"""README tables generated from action.yml, and the action's public contract."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_tables.py"
sys.path.insert(0, str(SCRIPT.parent))
import readme_tables  # noqa: E402

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())

CONTRACT_INPUTS = {"mode", "repo", "subfolder", "step", "local-dir", "revision", "endpoint", "token",
                   "private", "require", "runtime"}
CONTRACT_OUTPUTS = {"repo", "subfolder", "revision", "step", "hub-url", "local-dir", "found"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python scripts/readme_tables.py ARGS``, run in this process (its ``main``)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = readme_tables.main(list(args))
        except SystemExit as exc:  # argparse refusing the arguments
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess([str(SCRIPT), *args], code, out.getvalue(), err.getvalue())


def test_readme_tables_match_action_yml() -> None:
    proc = run("--check")
    assert proc.returncode == 0, (
        f"{proc.stderr}\nREADME.md needs these blocks (python scripts/readme_tables.py prints them, "
        "--write updates them):\n" + run().stdout)


def test_check_detects_drift_and_write_fixes_it(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- action-inputs:start -->\nSTALE-TABLE-ROW\n<!-- action-inputs:end -->\n\ntext\n\n"
                      "<!-- action-outputs:start -->\n<!-- action-outputs:end -->\n"
                      "<!-- cli-reference:start -->\nold help\n<!-- cli-reference:end -->\n"
                      "<!-- settings:start -->\n<!-- settings:end -->\n"
                      + "".join(f"<!-- example:{name}:start -->\n<!-- example:{name}:end -->\n"
                                for name in readme_tables.EXAMPLES))
    args = ("--action", str(ROOT / "action.yml"), "--readme", str(readme))
    assert run("--check", *args).returncode == 1
    assert run("--write", *args).returncode == 0
    assert run("--check", *args).returncode == 0
    text = readme.read_text()
    assert "STALE-TABLE-ROW" not in text and "old help" not in text and text.startswith("# x\n") and "\ntext\n" in text
    assert "uses: OWNER/ckpt-action@v1" in text and "mode: latest" in text
    assert "#### `push`" in text and "--local-dir TEXT" in text and "`CKPT_TIMEOUT`" in text
    for name in ACTION["inputs"]:
        assert f"| `{name}` |" in text
    for name in ACTION["outputs"]:
        assert f"| `{name}` |" in text
    # Missing markers are an error, not a silent pass.
    readme.write_text("# no markers\n")
    assert run("--check", *args).returncode == 1


def test_action_contract() -> None:
    assert CONTRACT_INPUTS <= set(ACTION["inputs"])
    assert CONTRACT_OUTPUTS <= set(ACTION["outputs"])
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", name) for name in ACTION["inputs"])
    for section in ("inputs", "outputs"):
        for name, spec in ACTION[section].items():
            assert spec.get("description", "").strip(), f"{section}.{name} has no description"
    assert ACTION["branding"]["icon"] and ACTION["branding"]["color"]
    assert ACTION["runs"]["using"] == "composite"


def test_inputs_reach_scripts_only_through_env() -> None:
    steps = ACTION["runs"]["steps"]
    for step in steps:
        assert "${{" not in step.get("run", ""), step.get("name")
    # The token is masked before anything else runs.
    assert "action/mask.sh" in steps[0]["run"] and steps[0]["env"]["INPUT_TOKEN"] == "${{ inputs.token }}"
    assert "add-mask" in (ROOT / "action" / "mask.sh").read_text()
    # Every input is handed to the runner script.
    env = steps[-1]["env"]
    for name in ACTION["inputs"]:
        assert env.get("INPUT_" + name.upper().replace("-", "_")) == f"${{{{ inputs.{name} }}}}", name
    # The token never becomes an argument.
    script = (ROOT / "action" / "run.sh").read_text()
    assert "--token" not in script
