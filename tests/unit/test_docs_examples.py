"""Every code example of the README and the site runs in the test suite or says why it does not
(tests/helpers/docblocks.py): no block goes unmarked, no mark names a test that does not take it,
and the README's links into the site name pages that exist."""

from __future__ import annotations

import re
import sys

import pytest

from tests.helpers.docblocks import ROOT, RUNS, Block, blocks, pages

sys.path.insert(0, str(ROOT / "scripts"))
import readme_tables

ALL = [b for page in pages() for b in blocks(page)]


def test_the_hand_written_pages_are_the_readme_and_the_site_but_its_reference():
    assert "README.md" in pages() and "docs/guides/resume.md" in pages()
    assert not [p for p in pages() if p.startswith("docs/reference/")]
    assert set(readme_tables.PAGES) <= set(pages())
    assert any(b.page == "docs/benchmarks.md" for b in ALL)  # BENCHMARKS.md, included by the page, is read


@pytest.mark.parametrize("b", ALL, ids=lambda b: f"{b.page}:{b.line}")
def test_every_code_block_runs_or_says_why_not(b: Block):
    where = f"{b.page}:{b.line}: a ```{b.lang} block"
    assert b.mark, f"{where} is not marked: <!-- runs: ID in tests/PATH.py --> or <!-- not-run: REASON -->"
    if b.mark == "not-run":
        assert len(b.detail.split()) >= 3, f"{where} says too little about why it does not run: {b.detail!r}"
    elif b.mark == "runs":
        target = RUNS.match(b.detail)
        assert target, f"{where}: runs: takes 'ID in tests/PATH.py', not {b.detail!r}"
        ident, test = target.groups()
        assert (ROOT / test).is_file(), f"{where} names {test}, which does not exist"
        assert f'"{ident}"' in (ROOT / test).read_text(encoding="utf-8"), f"{where}: {test} never takes {ident!r}"
    else:
        assert b.detail.split(":", 1)[1] in readme_tables.EXAMPLES, f"{where} is inside a copy of no example"


def test_a_workflow_shown_anywhere_is_a_generated_copy_of_a_runnable_one():
    for b in ALL:
        if b.lang == "yaml" and ("ckpt-action@" in b.code or "jobs:" in b.code):
            assert b.mark == "generated", f"{b.page}:{b.line}: a workflow example that is not a copy"
            assert "uses: ./" not in b.code and "uses: OWNER/ckpt-action@v1" in b.code
    for page, keys in readme_tables.PAGES.items():
        for key in keys:
            assert (ROOT / ".github" / "workflows" / key.split(":", 1)[1]).is_file(), (page, key)


def test_the_marks_are_read_as_written():
    text = ("<!-- not-run: no Hub here -->\n```bash\nx\n```\n\n```python\ny\n```\n"
            "<!-- example:a.yml:start -->\n```yaml\nz\n```\n<!-- example:a.yml:end -->\n```sh\nw\n```\n")
    got = [(b.lang, b.mark, b.detail) for b in blocks("x.md", text)]
    assert got == [("bash", "not-run", "no Hub here"), ("python", None, ""), ("yaml", "generated", "example:a.yml"),
                   ("sh", None, "")]


LINK = re.compile(r"\]\(((?:docs/|\.github/|[A-Z]+\.md)[^)#\s]*)(?:#([\w-]+))?\)")


def test_the_readme_links_name_files_of_the_checkout():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = LINK.findall(readme)
    assert len({p for p, _ in links if p.startswith("docs/")}) >= 12, links
    for path, _anchor in links:
        assert (ROOT / path).is_file(), f"README.md links to {path}, which does not exist"
    for page in {p for p, _ in links if p.startswith("docs/")}:
        rel = page.removeprefix("docs/")
        assert rel in (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), f"{page} is not in the site's nav"
