"""The process ends as soon as its output is out (``ckpt_action.cli.app.console``, no
interpreter teardown), and nothing the teardown would have done that matters is lost: the
exit code, every byte of stdout through a pipe, the exit handlers, a thread still running."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT as REPO_ROOT


def _child(code: str, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                            "PYTHONPATH": str(REPO_ROOT)})


def test_exit_code_and_the_json_error_object_reach_the_caller(tmp_path):
    run = subprocess.run([sys.executable, "-m", "ckpt_action", "latest", "--json"], capture_output=True, text=True,
                         timeout=120, cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                          "PYTHONPATH": str(REPO_ROOT)})
    assert run.returncode == 2, run.stderr
    assert json.loads(run.stdout)["exit_code"] == 2
    assert "--repo" in run.stderr


def test_exit_handlers_run_and_a_big_output_is_whole_through_a_pipe(tmp_path):
    marker = tmp_path / "handler-ran"
    run = _child(f"""
        import atexit, sys
        atexit.register(lambda: print("printed by a handler"))  # buffered: out only if flushed after them
        atexit.register(lambda: open({str(marker)!r}, "w").write("yes"))
        sys.argv = ["ckpt-action", "--help"]
        sys.stdout.write("x" * 1_000_000 + "\\n")  # more than a pipe holds: flushed before the end
        from ckpt_action.cli.app import console
        console()
    """, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("x" * 1_000_000 + "\n") and "push" in run.stdout
    assert run.stdout.endswith("printed by a handler\n")
    assert marker.read_text() == "yes"


def test_a_thread_still_running_is_waited_for(tmp_path):
    marker = tmp_path / "thread-done"
    run = _child(f"""
        import sys, threading, time
        def late():
            time.sleep(0.5)
            open({str(marker)!r}, "w").write("done")
        threading.Thread(target=late).start()
        sys.argv = ["ckpt-action", "--version"]
        from ckpt_action.cli.app import console
        console()
    """, tmp_path)
    assert run.returncode == 0, run.stderr
    assert marker.read_text() == "done"
