"""A griffe extension for the documentation site: the docstrings' doctest examples (``>>>``
lines and the output after them, run by the test suite) become fenced ``pycon`` blocks, so
Markdown shows them as code instead of reading their brackets as links."""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    out: list[str] = []
    in_block = False
    for line in text.splitlines():
        starts = line.lstrip().startswith(">>>")
        if starts and not in_block:
            out += ["```pycon"]
            in_block = True
        elif in_block and not line.strip():
            out += ["```"]
            in_block = False
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


class FenceDoctests(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
