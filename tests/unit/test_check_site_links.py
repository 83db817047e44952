"""scripts/check_site_links.py, run by .ci/run on the strictly built site, finds a link to a
missing page, a missing anchor and a root link outside the site's path, and passes good ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_site_links", ROOT / "scripts" / "check_site_links.py")
assert _spec is not None and _spec.loader is not None
links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(links)


def _site(root: Path, body: str) -> Path:
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "index.html").write_text('<h2 id="resume">Resume</h2>', encoding="utf-8")
    (root / "index.html").write_text(body, encoding="utf-8")
    return root


def test_good_links_pass(tmp_path):
    site = _site(tmp_path, '<a href="guide/">g</a><a href="guide/#resume">r</a><a href="/ckpt-action/guide/">a</a>'
                           '<a href="https://example.org/x">e</a><a href="#top" id="top">t</a>')
    assert links.broken_links(site, "/ckpt-action/") == []


def test_broken_links_are_each_named(tmp_path):
    site = _site(tmp_path, '<a href="guides/">g</a><a href="guide/#resum">r</a><a href="/other/guide/">o</a>')
    assert links.broken_links(site, "/ckpt-action/") == [
        "index.html: guides/: no such file", "index.html: guide/#resum: no such anchor",
        "index.html: /other/guide/: outside /ckpt-action/"]


def test_the_base_path_is_the_site_url_s():
    assert links.base_path() == "/ckpt-action/"
