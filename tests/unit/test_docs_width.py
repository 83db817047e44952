"""No line of a code block on the documentation site runs off the page: every fenced block of
every page under docs/ (hand-written, generated reference and the copies of the example
workflows, and what a page includes, BENCHMARKS.md) keeps its lines within ``PAGE_WIDTH``
characters, what Material's content column shows without a scroll bar (scripts/readme_tables.py
says how that is counted; the CLI reference's help is rendered at that width)."""

from __future__ import annotations

import sys

from tests.helpers.docblocks import ROOT, blocks

sys.path.insert(0, str(ROOT / "scripts"))
from readme_tables import PAGE_WIDTH


def site_pages() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))


def test_every_code_block_line_of_the_site_fits_the_page():
    assert PAGE_WIDTH == 80
    too_long = [f"{b.page}:{b.line + 1 + i}: {len(line)} characters: {line.strip()[:60]}"
                for page in site_pages() for b in blocks(page)
                for i, line in enumerate(b.code.splitlines()) if len(line) > PAGE_WIDTH]
    assert not too_long, "\n".join(too_long)


def test_the_check_sees_a_long_line():
    page = "# p\n\n```bash\n" + "x" * (PAGE_WIDTH + 1) + "\n```\n"
    assert [len(line) for b in blocks("docs/index.md", page) for line in b.code.splitlines()] == [PAGE_WIDTH + 1]
