"""The one escaping function for text that crosses into logs, annotations, summaries and files.

ckpt-action prints text it does not control (folder names and messages from the Hub,
fields of pointer files, the user's own input) into logs that GitHub Actions parses for
workflow commands: a line whose first non-blank characters are ``::`` is a command
(``::add-mask::``, ``::warning::``, ``::stop-commands::``), and ``##[`` starts the older
form anywhere in a line. Everything printed or written goes through :func:`escape` for
its destination, so no value can end its line, start a command, or break out of a
Markdown table cell.
"""

from __future__ import annotations

import re
from typing import Literal

Target = Literal["text", "annotation", "markdown", "dotenv"]

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators some viewers
# treat as line breaks. Tab is a control too: a value never needs one.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Characters with a meaning to Markdown or HTML inside a GitHub job summary table.
_MARKDOWN_RE = re.compile(r"[&<>\"'|\\`*_{}\[\]()#+!~=:]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(value: object, to: Target = "text") -> str:
    """``value`` as one line that is safe to print or write to ``to``.

    - ``text``: a log line. Control characters (newlines included) become visible
      ``\\xNN`` escapes, ``##[`` is broken up, and a leading ``::`` is escaped, so the
      result can neither span lines nor be read as a workflow command.
    - ``annotation``: the message of ``::error::``/``::warning::``; also percent-encoded as
      the runner expects (``%``, CR and LF), so the message cannot end early.
    - ``markdown``: a job-summary table cell; also every character Markdown or HTML gives
      a meaning to becomes a numeric character reference (``|`` cannot end the cell,
      ``<`` cannot start a tag, a backtick cannot open code).
    - ``dotenv``: the value of a ``KEY=value`` line (the text rules, which already keep
      it on one line).

    >>> escape("checkpoint-7\\n::add-mask::x")
    'checkpoint-7\\\\x0a::add-mask::x'
    >>> escape("::warning::owned")
    '\\\\x3a:warning::owned'
    >>> escape("a|b<i>", "markdown")
    'a&#124;b&#60;i&#62;'
    """
    text = "" if value is None else str(value)
    text = _CONTROL_RE.sub(_visible, text)
    text = text.replace("##[", "\\x23#[")
    stripped = text.lstrip(" ")
    if stripped.startswith("::"):
        text = text[: len(text) - len(stripped)] + "\\x3a" + stripped[1:]
    if to == "annotation":
        return text.replace("%", "%25")
    if to == "markdown":
        return _MARKDOWN_RE.sub(lambda m: f"&#{ord(m.group())};", text)
    return text
