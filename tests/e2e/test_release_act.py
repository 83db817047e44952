"""release.yml's `dist` job under act, as GitHub runs it on a tag: the sdists and wheels of
ckpt-action and ckpt-action-localhub are built with `python -m build`, pass `twine check`,
hold exactly their packages and carry the tag's version. act stops before the upload: it has
no artifact store (the step is skipped under act), and the PyPI job needs GitHub's OIDC token.
About 80 s, most of it installing the release lock into a fresh venv from the local index."""

from __future__ import annotations

import json
import re

import pytest

from ckpt_action.version import __version__
from tests.e2e.test_action_act import WORKFLOWS, assert_ok, run_act

pytestmark = pytest.mark.act
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"


def test_the_release_builds_and_checks_the_distributions_under_act(tmp_path):
    workflow = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert f"uses: {UPLOAD}" in workflow  # the pin the stand-in below replaces
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": f"refs/tags/v{__version__}"}), encoding="utf-8")
    # act clones every action a job names before it runs, even a skipped one, and cannot reach
    # GitHub here: an empty local action stands in for the upload step, which is skipped anyway.
    noop = tmp_path / "noop"
    noop.mkdir()
    (noop / "action.yml").write_text("name: skipped\nruns:\n  using: composite\n  steps: []\n", encoding="utf-8")
    proc = run_act(WORKFLOWS / "release.yml", "push", "-j", "dist", "-e", str(event),
                   "-P", "ubuntu-24.04=-self-hosted", "--local-repository", f"{UPLOAD}={noop}", timeout=900)
    log = assert_ok(proc)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    for name in (f"ckpt_action-{__version__}-py3-none-any.whl", f"ckpt_action-{__version__}.tar.gz",
                 f"ckpt_action_localhub-{__version__}-py3-none-any.whl", f"ckpt_action_localhub-{__version__}.tar.gz"):
        assert f"Checking dist/{name}: PASSED" in plain, plain[-4000:]
    assert "dist: every wheel holds exactly its package" in plain
    assert "Success - Main Check them" in plain
    assert "Main Keep them for the upload" not in plain  # skipped under act, as the workflow says
