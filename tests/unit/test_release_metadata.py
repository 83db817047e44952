"""What a PyPI user gets: one version, a demo extra that installs the local Hub at that version,
a page that renders there (no link relative to the repository), and a missing-server message
naming the pip command that works from PyPI."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

from ckpt_action.cli import localhub
from ckpt_action.version import __version__

ROOT = Path(__file__).resolve().parents[2]


def _pyproject(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_the_version_has_one_source_and_the_local_hub_and_demo_extra_follow_it():
    project = _pyproject(ROOT / "pyproject.toml")
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ckpt_action.version.__version__"}
    server = _pyproject(ROOT / "packages" / "ckpt-localhub" / "pyproject.toml")["project"]
    assert server["version"] == __version__
    assert project["project"]["optional-dependencies"]["demo"] == [f"{server['name']}=={__version__}"]


def test_the_pypi_page_has_only_absolute_links_and_the_search_words():
    project = _pyproject(ROOT / "pyproject.toml")["project"]
    page = (ROOT / project["readme"]["file"]).read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)", page) + re.findall(r"^\[[^\]]+\]:\s*(\S+)", page, re.M)
    assert targets and all(t.startswith("https://") for t in targets), targets
    words = " ".join([page, project["description"], *project["keywords"]]).lower()
    for term in ("checkpoint", "resume", "hugging face hub", "github action", "trainer", "preemption"):
        assert term in words, term
    assert "pip install ckpt-action" in page


def test_the_missing_local_hub_message_names_the_pypi_extra():
    assert 'pip install "ckpt-action[demo]"' in localhub.INSTALL
    assert "pip install ./packages/ckpt-localhub" in localhub.INSTALL
