"""release.yml's `dist` job under act, as GitHub runs it on a tag: the sdists and wheels of
ckpt-action and ckpt-action-localhub are built with `python -m build`, pass `twine check`,
hold exactly their packages and carry the tag's version. act stops before the upload: it has
no artifact store (the step is skipped under act), and the PyPI job needs GitHub's OIDC token.
Both install a lock into a fresh venv: pip takes the pinned wheels from the tests' wheelhouse
(``run_act``, tests/helpers/wheelhouse.py), every hash checked.
And docs.yml's `build` job, as on a tag: the reference pages match the code, the site builds
strict and its links hold; act stops before the Pages upload and the deploy (GitHub's OIDC
token and Pages)."""

from __future__ import annotations

import json
import re

import pytest

from ckpt_action.version import __version__
from tests.e2e.test_action_act import WORKFLOWS, assert_ok, run_act

pytestmark = pytest.mark.act
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"
SETUP_PYTHON = "actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065"
PAGES_UPLOAD = "actions/upload-pages-artifact@56afc609e74202658d3ffba0e8f6dda462b719fa"


def _noop_action(tmp_path):
    """act clones every action a job names before it runs, even a skipped one, and cannot reach
    GitHub here: an empty local action stands in for one."""
    noop = tmp_path / "noop"
    noop.mkdir(exist_ok=True)
    (noop / "action.yml").write_text("name: skipped\nruns:\n  using: composite\n  steps: []\n", encoding="utf-8")
    return noop


def test_the_release_builds_and_checks_the_distributions_under_act(tmp_path):
    workflow = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert f"uses: {UPLOAD}" in workflow  # the pin the stand-in below replaces
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": f"refs/tags/v{__version__}"}), encoding="utf-8")
    noop = _noop_action(tmp_path)  # for the upload step, which is skipped anyway
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


def test_the_docs_workflow_builds_the_site_strict_under_act(tmp_path):
    workflow = (WORKFLOWS / "docs.yml").read_text(encoding="utf-8")
    assert f"uses: {SETUP_PYTHON}" in workflow and f"uses: {PAGES_UPLOAD}" in workflow  # the pins replaced below
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": f"refs/tags/v{__version__}"}), encoding="utf-8")
    noop = _noop_action(tmp_path)
    # The host's Python stands in for setup-python's (act's host mode): an action of one step that says so
    # (act refuses to run a composite action without steps); the upload is skipped under act.
    host_python = tmp_path / "host-python"
    host_python.mkdir()
    (host_python / "action.yml").write_text("name: host python\nruns:\n  using: composite\n  steps:\n"
                                            "    - run: python3 --version\n      shell: bash\n", encoding="utf-8")
    proc = run_act(WORKFLOWS / "docs.yml", "push", "-j", "build", "-e", str(event), "-P", "ubuntu-24.04=-self-hosted",
                   "--local-repository", f"{SETUP_PYTHON}={host_python}",
                   "--local-repository", f"{PAGES_UPLOAD}={noop}", timeout=900)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", assert_ok(proc))
    assert "reference pages up to date" in plain
    assert "Documentation built in" in plain, plain[-4000:]
    assert "Success - Main Build the site (strict) and check its links" in plain
    assert "Main Keep the site for the deploy" not in plain  # skipped under act, as the workflow says
