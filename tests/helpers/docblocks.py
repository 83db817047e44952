"""The code blocks of the README and of the site's hand-written pages, and the mark each carries.

Every fenced block of a hand-written page (the README, ``docs/**.md`` but the generated
``docs/reference/``) is one of:

- a generated copy of a runnable workflow (between ``<!-- example:NAME:start -->`` and its end
  marker; scripts/readme_tables.py writes it, act runs the workflow in tests/e2e/test_action_act.py);
- marked ``<!-- runs: ID in tests/PATH.py -->`` on the line before it: that test takes the block
  with :func:`block` and runs it;
- marked ``<!-- not-run: REASON -->`` on the line before it, the reason said.

``tests/unit/test_docs_examples.py`` holds every page to this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.S | re.M)
MARK = re.compile(r"<!-- (runs|not-run): (.*?) -->\n$")
RUNS = re.compile(r"^([\w-]+) in (tests/[\w/]+\.py)$")
GENERATED = re.compile(r"<!-- (example):([\w.-]+):(start|end) -->")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    mark: str | None  # "runs", "not-run" or "generated"
    detail: str  # the runs: target, the reason, or the generated copy's key


def pages() -> list[str]:
    """The hand-written pages, relative to the checkout."""
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
                  if "reference" not in p.relative_to(ROOT / "docs").parts)
    return ["README.md", *docs]


SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def blocks(page: str, text: str | None = None) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8") if text is None else text
    # A file the page includes (pymdownx.snippets, from the checkout's root) is part of it.
    text = SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), text)
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()]
        line = before.count("\n") + 1
        opened = [m for m in GENERATED.finditer(before)]
        if opened and opened[-1].group(3) == "start":
            mark, detail = "generated", f"{opened[-1].group(1)}:{opened[-1].group(2)}"
        elif (found := MARK.search(before)) and found.end() == len(before):
            mark, detail = found.group(1), found.group(2).strip()
        else:
            mark, detail = None, ""
        out.append(Block(page, line, match.group(1), match.group(2), mark, detail))
    return out


def block(page: str, ident: str) -> str:
    """The code of the block of ``page`` marked ``<!-- runs: IDENT in ... -->``."""
    found = [b for b in blocks(page) if b.mark == "runs" and b.detail.split(" in ")[0] == ident]
    assert len(found) == 1, f"{page} has {len(found)} blocks marked runs: {ident}"
    return found[0].code
