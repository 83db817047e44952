"""How the GitHub Actions runner reads what a step prints and writes, for tests.

Written from the runner's behaviour (actions/runner): a stdout/stderr line is a workflow
command when, after leading white space, it starts with ``::`` (``::name props::data``),
or when it holds ``##[`` followed later by ``]`` (the older form, anywhere in the line);
``$GITHUB_OUTPUT`` holds ``NAME=VALUE`` lines and ``NAME<<DELIM`` heredocs whose value
runs until a line equal to the delimiter.
"""

from __future__ import annotations

import re
from pathlib import Path

_V1_RE = re.compile(r"##\[([^\]\s;]+)[^\]]*\]")


def workflow_commands(text: str) -> list[tuple[str, str]]:
    """(command, data) for every line of ``text`` the runner would treat as a command.

    Lines are split as the runner splits them (LF, CRLF or lone CR).
    """
    found = []
    for line in re.split(r"\r\n|\n|\r", text):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            head, sep, data = stripped[2:].partition("::")
            if sep:
                found.append((head.split(" ", 1)[0], data))
        for match in _V1_RE.finditer(line):
            found.append((match.group(1), line[match.end():]))
    return found


def unescape_data(data: str) -> str:
    """A command's data as the runner shows it (``%0A`` is a newline...)."""
    return data.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _read_line(text: str, index: int) -> tuple[str | None, int, str | None]:
    """(line, next index, the newline that ended it), splitting on LF or CRLF as the runner does."""
    if index >= len(text):
        return None, index, None
    end = text.find("\n", index)
    if end < 0:
        return text[index:], len(text), None
    if end > index and text[end - 1] == "\r":
        return text[index:end - 1], end + 1, "\r\n"
    return text[index:end], end + 1, "\n"


def parse_github_output(path: Path) -> dict[str, str]:
    """The outputs the runner reads from a ``$GITHUB_OUTPUT`` file; raises where it would fail."""
    text = path.read_bytes().decode("utf-8")  # as written: no newline translation
    out: dict[str, str] = {}
    line, index, _ = _read_line(text, 0)
    while line is not None:
        if line:
            eq, heredoc = line.find("="), line.find("<<")
            if eq >= 0 and (heredoc < 0 or eq < heredoc):
                key, value = line.split("=", 1)
            elif heredoc >= 0:
                key, delimiter = line.split("<<", 1)
                start = end = index
                current, index, newline = _read_line(text, index)
                while current != delimiter:
                    if current is None:
                        raise ValueError(f"matching delimiter not found {delimiter!r}")
                    if newline is None:
                        raise ValueError("EOF marker missing new line")
                    end = index - len(newline)
                    current, index, newline = _read_line(text, index)
                value = text[start:end] if end > start else ""
            else:
                raise ValueError(f"invalid format {line!r}")
            if not key:
                raise ValueError("empty output name")
            out[key] = value
        line, index, _ = _read_line(text, index)
    return out
