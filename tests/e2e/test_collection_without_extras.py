"""The README's test command in a venv with no optional extra: the whole suite is collected
(doctests of every module included) with no error, and what needs an extra skips, saying which.

The extras are made absent in the child the way a venv without them has them: ``import torch``
fails and ``importlib.util.find_spec`` answers None (a None in ``sys.modules``), whatever this
venv holds. ``.ci/run`` runs the same collection in a venv made from ``requirements-dev.lock``
alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = ("torch", "transformers", "accelerate", "lightning", "orbax", "jax")
WITHOUT_EXTRAS = (f"import sys\nfor name in {EXTRAS!r}:\n    sys.modules[name] = None\n"
                  "import pytest\nsys.exit(pytest.main(sys.argv[1:]))\n")


def test_the_whole_suite_collects_without_the_extras_and_says_what_skips(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HF_", "CKPT_"))}
    run = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "error" not in out.splitlines()[-1], out[-2000:]
    # Each module that needs an extra is named in a skip that says which extra.
    for module, extra in [("ckpt_action/integrations/dcp.py", "[distributed]"),
                          ("ckpt_action/integrations/transformers.py", "[transformers]"),
                          ("tests/helpers/dist_dcp_script.py", "[distributed]"),
                          ("tests/helpers/dist_push_script.py", "[distributed]"),
                          ("tests/helpers/ranks_bucket_push.py", "[distributed]"),
                          ("tests/helpers/dist_trainer_script.py", "[transformers]"),
                          ("tests/integration/test_watch_dcp.py", "requirements-transformers.lock"),
                          ("tests/integration/test_watch_lightning.py", "requirements-frameworks.lock"),
                          ("tests/integration/test_watch_orbax.py", "requirements-frameworks.lock")]:
        skips = [line for line in out.splitlines() if line.startswith("SKIPPED") and module in line]
        assert skips and extra in skips[0], f"{module}: no skip naming {extra} in\n{out[-3000:]}"
