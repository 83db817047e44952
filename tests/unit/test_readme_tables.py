"""The workflow copies the README and the site carry (scripts/readme_tables.py), and the action's public contract."""

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


def test_the_copies_match_the_workflows() -> None:
    proc = run("--check")
    assert proc.returncode == 0, (
        f"{proc.stderr}\nthe pages need these blocks (python scripts/readme_tables.py prints them, "
        "--write updates them):\n" + run().stdout)


def test_the_readme_carries_no_reference_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for marker in ("action-inputs:start", "action-outputs:start", "cli-reference:start", "settings:start"):
        assert marker not in readme, marker
    assert "| `mode` |" not in readme and "#### `push`" not in readme  # the tables live in docs/reference/


def test_check_detects_drift_and_write_fixes_it(tmp_path: Path) -> None:
    for page, keys in readme_tables.PAGES.items():
        path = tmp_path / page
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# x\n\n" + "".join(f"<!-- {key}:start -->\nSTALE-COPY\n<!-- {key}:end -->\n\ntext\n"
                                             for key in keys))
    args = ("--root", str(tmp_path))
    assert run("--check", *args).returncode == 1
    assert run("--write", *args).returncode == 0
    assert run("--check", *args).returncode == 0
    for page in readme_tables.PAGES:
        text = (tmp_path / page).read_text()
        assert "STALE-COPY" not in text and text.startswith("# x\n") and "\ntext\n" in text, page
        assert "uses: OWNER/ckpt-action@v1" in text and "uses: ./" not in text, page
    readme = (tmp_path / "README.md").read_text()
    assert "mode: latest" in readme and "mode: pull" in readme and "mode: push" in readme and "\njobs:" in readme
    # A missing marker pair is an error, not a silent pass.
    (tmp_path / "README.md").write_text("# no markers\n")
    proc = run("--check", *args)
    assert proc.returncode == 1 and "README.md: marker pair not found" in proc.stderr


def test_the_reference_tables_hold_every_input_output_command_and_setting() -> None:
    text = "\n".join(readme_tables.tables(ACTION).values())
    assert "#### `push`" in text and "--local-dir TEXT" in text and "`CKPT_TIMEOUT`" in text
    for name in ACTION["inputs"]:
        assert f"| `{name}` |" in text
    for name in ACTION["outputs"]:
        assert f"| `{name}` |" in text


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
