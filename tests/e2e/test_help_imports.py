"""``ckpt-action --help`` lists every command without importing the local Hub: its package may
be missing, or installed without its dependencies (``pip install --no-deps``), and the help must
still work. A child process, because what it imports is the point: one where the package, or
one of its dependencies, cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ckpt_action.cli.app import _Group, cli

# Runs the CLI's --help with ``blocked`` unimportable (None in sys.modules makes an import of it
# fail as a missing module does), then reports what it printed and whether the local Hub was imported.
_CHILD = """
import contextlib, io, json, sys
for name in sys.argv[1:]:
    sys.modules[name] = None
from ckpt_action.cli.app import main
out, code = io.StringIO(), 0
with contextlib.redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit as exc:
        code = exc.code
json.dump({"code": code, "help": out.getvalue(), "imported": "ckpt_localhub" in sys.modules and
           sys.modules["ckpt_localhub"] is not None}, sys.__stdout__)
"""


def _help_with(*blocked: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, *blocked], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _listed(help_text: str) -> dict[str, str]:
    """The Commands section of a help text: each command's name and its one line."""
    section = help_text.split("Commands:\n", 1)[1]
    rows = [line.split(None, 1) for line in section.splitlines() if line.startswith("  ") and line.strip()]
    return {row[0]: row[1] if len(row) > 1 else "" for row in rows}


def _commands() -> list[str]:
    """Every command a user can name: the group's own but the hidden ones, and those defined elsewhere."""
    return sorted([name for name, command in cli.commands.items() if not command.hidden] + list(_Group.elsewhere))


@pytest.mark.parametrize("blocked", [("lz4",), ("ckpt_localhub",)], ids=["hub-without-lz4", "hub-not-installed"])
def test_help_lists_every_command_without_importing_the_local_hub(blocked):
    got = _help_with(*blocked)
    assert got["code"] == 0 and not got["imported"], got
    listed = _listed(got["help"])
    assert sorted(listed) == _commands() and "local-hub" in listed, listed
    if blocked == ("ckpt_localhub",):
        assert listed["local-hub"].startswith("(not installed)"), listed
    else:
        assert listed["local-hub"].startswith("Run the Hub-compatible local server"), listed


def test_the_help_said_for_a_command_elsewhere_is_its_own():
    """The line --help lists for ``local-hub`` without importing it is the command's own help."""
    from ckpt_action.cli.localhub import import_local_hub

    for name, (module, attr) in _Group.elsewhere.items():
        command = getattr(import_local_hub(name, module), attr)
        assert _Group.elsewhere_help[name] == command.help, name


def test_local_hub_without_a_dependency_says_what_to_install():
    child = ("import sys; sys.modules['lz4'] = None\nfrom ckpt_action.cli.app import main\n"
             "main(['local-hub', '--port', '0'])")
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'lz4'" in lines[0] and "requirements.lock" in lines[0], proc.stderr
