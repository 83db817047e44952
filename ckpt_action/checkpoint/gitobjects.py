"""Git and Hub object facts, kept in one place: object ids, LFS pointers, and the LFS decision.

ckpt-action predicts the git tree id the Hub will report for a pushed folder (so ``latest``
can prove a checkpoint complete from its manifest alone). The local Hub, which stores files
and computes those ids, has its own copy (``ckpt_localhub.gitobjects``), so that a bug here
cannot agree with itself on both sides; ``tests/unit/test_gitobjects.py`` holds each to real
``git``. This module imports nothing from ``ckpt_action``.

Facts:

- git object ids: blobs (also fed chunk by chunk after a header for a known size) and
  trees (entries sorted the way git sorts them, directories as ``name/``);
- the LFS pointer file the Hub commits in place of an LFS file;
- the ``.gitattributes`` the Hub puts in every new repo;
- the LFS decision the Hub's ``preupload`` makes: the repo's ``.gitattributes`` says
  ``filter=lfs``, or the file has 10 MiB or more, or its first 512 bytes hold a NUL;
- ``.gitattributes`` and ``.gitignore`` pattern matching as git does it.

Example:

    >>> blob_oid(b"hi")
    '32f95c0d1244a78b2be1bab8de17906fabb2c4a8'
    >>> is_lfs("saved_model/README.txt", 20, b"text")
    True
    >>> GitAttributes.parse(b"*.dat filter=lfs\\n").tracks_lfs("a/b.dat")
    True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# ------------------------------------------------------------------------------- object ids

EMPTY_TREE_OID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_DIR_MODE = b"40000 "
_FILE_MODE = b"100644 "


def blob_header(size: int) -> bytes:
    """What git hashes before a blob's bytes."""
    return b"blob %d\x00" % size


def blob_hasher(size: int) -> Any:
    """A sha1 already fed the header of a ``size``-byte blob: update it with the bytes."""
    return hashlib.sha1(blob_header(size), usedforsecurity=False)


def blob_oid(data: bytes) -> str:
    """The git blob id of ``data`` (what the Hub reports as ``oid`` for a regular file)."""
    hasher = blob_hasher(len(data))
    hasher.update(data)
    return str(hasher.hexdigest())


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The pointer file git stores in place of an LFS file's bytes."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def lfs_pointer_oid(sha256: str, size: int) -> str:
    """The git blob id the Hub reports for an LFS file (the id of its pointer)."""
    return blob_oid(lfs_pointer(sha256, size))


@dataclass(frozen=True)
class TreeItem:
    """One entry of a git tree: a file (a blob) or a directory (a tree), by hex object id."""

    name: str
    oid: str
    is_dir: bool = False


def tree_oid(items: Iterable[TreeItem]) -> str:
    """The git tree id of a directory holding exactly these entries.

    git sorts entries by name bytes with ``/`` appended to directory names, so ``a.b``
    comes before the directory ``a`` but after a file ``a``.
    """
    def key(item: TreeItem) -> bytes:
        name = item.name.encode()
        return name + b"/" if item.is_dir else name

    body = b"".join(
        (_DIR_MODE if item.is_dir else _FILE_MODE) + item.name.encode() + b"\x00" + bytes.fromhex(item.oid)
        for item in sorted(items, key=key)
    )
    return hashlib.sha1(b"tree %d\x00" % len(body) + body, usedforsecurity=False).hexdigest()


# ------------------------------------------------------------------------------- the LFS decision

LFS_MIN_SIZE = 10 * 1024 * 1024
"""Files of this many bytes or more go through LFS whatever their name."""
SAMPLE_SIZE = 512
"""The client sends the first 512 bytes of each file to ``preupload``; a NUL there means binary."""

HUB_LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)
"""The patterns of the ``.gitattributes`` every new Hub repo starts with, in its order."""

DEFAULT_GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in HUB_LFS_PATTERNS).encode()
"""The ``.gitattributes`` file the Hub commits when it creates a repo."""


def _wildmatch_regex(pattern: str) -> str:
    """A regex for a git wildmatch pattern matched with WM_PATHNAME (``*`` stops at ``/``).

    ``**/`` at the start, ``/**/`` inside and ``/**`` at the end span directories; any
    other ``**`` is a plain ``*``. ``\\`` escapes the next character; ``[...]`` is a
    bracket expression (``!`` or ``^`` first negates) that never matches ``/``.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_start = i == 0 or pattern[i - 1] == "/"
            at_end = j == n or pattern[j] == "/"
            if j - i >= 2 and at_start and at_end:
                if j == n:  # "dir/**" (or "**" alone): everything below
                    out.append(".*")
                else:  # "**/": zero or more whole directories
                    out.append("(?:.*/)?")
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (bracket := _bracket(pattern, i)) is not None:
            regex, i = bracket
            out.append(regex)
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
    "space": " \\t\\n\\r\\f\\v", "xdigit": "0-9A-Fa-f", "blank": " \\t",
}


def _bracket(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the bracket expression at ``start`` and the index after it; None when
    it never closes (then the ``[`` is a literal, as in git)."""
    n = len(pattern)
    j = start + 1
    negate = j < n and pattern[j] in "!^"
    if negate:
        j += 1
    parts: list[str] = []
    first = True
    while j < n:
        c = pattern[j]
        if c == "]" and not first:
            body = "".join(parts)
            return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), j + 1
        first = False
        if pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            if end != -1 and pattern[j + 2:end] in _POSIX_CLASSES:
                parts.append(_POSIX_CLASSES[pattern[j + 2:end]])
                j = end + 2
                continue
        escaped = c == "\\" and j + 1 < n
        if escaped:
            j += 1
            c = pattern[j]
        if c == "-" and not escaped and parts and j + 1 < n and pattern[j + 1] != "]":
            parts.append("-")  # a range, between the characters around it
        else:
            parts.append(re.escape(c))
        j += 1
    return None


@dataclass(frozen=True)
class PathPattern:
    """A ``.gitattributes`` / ``.gitignore`` path pattern.

    Without a ``/`` (a trailing one aside) it matches a file's name at any depth; with one
    it is anchored to the repo root. A trailing ``/`` makes it match directories only.
    """

    text: str
    regex: re.Pattern[str]
    basename: bool
    dir_only: bool

    @classmethod
    def compile(cls, text: str) -> PathPattern:
        dir_only = text.endswith("/") and not text.endswith("\\/")
        body = text.rstrip("/") if dir_only else text
        basename = "/" not in body
        body = body.lstrip("/") if not basename else body
        return cls(text, re.compile(_wildmatch_regex(body), re.DOTALL), basename, dir_only)

    def matches(self, path: str, is_dir: bool = False) -> bool:
        if self.dir_only and not is_dir:
            return False
        subject = path.rsplit("/", 1)[-1] if self.basename else path
        return self.regex.fullmatch(subject) is not None


def _unquote(token: str) -> str:
    """A pattern written as a quoted string (git allows that for names with spaces)."""
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token


def _split_line(line: str) -> list[str]:
    if line.startswith('"'):
        end = 1
        while end < len(line) and line[end] != '"':
            end += 2 if line[end] == "\\" else 1
        return [line[: end + 1], *line[end + 1:].split()]
    return line.split()


# Attribute states as git keeps them: True (set), False (unset), a string (a value).
_State = bool | str


@dataclass(frozen=True)
class GitAttributes:
    """The lines of a ``.gitattributes`` file, asked which state an attribute has for a path.

    Later lines override earlier ones for the attributes they mention. ``attr`` sets,
    ``-attr`` unsets, ``!attr`` returns it to unspecified, ``attr=value`` gives a value;
    ``[attr]name ...`` defines a macro that later lines may use. Negative patterns
    (``!pattern``) are not allowed in attributes files and are skipped, as git does.
    """

    rules: tuple[tuple[PathPattern, tuple[tuple[str, _State | None], ...]], ...]

    @classmethod
    def parse(cls, data: bytes | str) -> GitAttributes:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        macros: dict[str, list[tuple[str, _State | None]]] = {"binary": [("diff", False), ("merge", False),
                                                                        ("text", False)]}
        rules = []
        for raw in text.splitlines()[:10000]:  # bounded: a hostile file cannot make this loop long
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[attr]"):
                name, *specs = line[len("[attr]"):].split()
                macros[name] = [s for spec in specs for s in _spec(spec, macros)]
                continue
            pattern, *specs = _split_line(line)
            pattern = _unquote(pattern)
            if pattern.startswith("!") or not specs:
                continue
            states = tuple(s for spec in specs for s in _spec(spec, macros))
            rules.append((PathPattern.compile(pattern), states))
        return cls(tuple(rules))

    def state(self, path: str, attr: str) -> _State | None:
        """The attribute's state for a file at ``path`` (None: unspecified)."""
        for pattern, states in reversed(self.rules):
            mentioned = [value for name, value in states if name == attr]
            if mentioned and pattern.matches(path):
                return mentioned[-1]
        return None

    def tracks_lfs(self, path: str) -> bool:
        """Whether git would store the file at ``path`` through LFS (``filter=lfs``)."""
        return self.state(path, "filter") == "lfs"


def _spec(spec: str, macros: dict[str, list[tuple[str, _State | None]]]) -> list[tuple[str, _State | None]]:
    if spec.startswith("-"):
        return [(spec[1:], False)]
    if spec.startswith("!"):
        return [(spec[1:], None)]
    name, eq, value = spec.partition("=")
    if eq:
        return [(name, value)]
    return [(name, True), *macros.get(name, [])]


@lru_cache(maxsize=64)
def parse_gitattributes(data: bytes) -> GitAttributes:
    """``GitAttributes.parse``, cached by content: a repo's file changes rarely."""
    return GitAttributes.parse(data)


DEFAULT_ATTRIBUTES = parse_gitattributes(DEFAULT_GITATTRIBUTES)


def is_binary_sample(sample: bytes) -> bool:
    """The Hub's binary test: a NUL byte in the first 512 bytes."""
    return b"\x00" in sample[:SAMPLE_SIZE]


def is_lfs(path: str, size: int, sample: bytes, attributes: GitAttributes = DEFAULT_ATTRIBUTES) -> bool:
    """Whether the Hub stores this file through LFS: what ``preupload`` answers.

    ``attributes`` is the repo's ``.gitattributes`` at the revision; the default is the
    file every new repo starts with. Empty files are never LFS (the client sends them
    as regular files whatever the answer).
    """
    if size == 0:
        return False
    return size >= LFS_MIN_SIZE or is_binary_sample(sample) or attributes.tracks_lfs(path)


# ------------------------------------------------------------------------------- .gitignore


@dataclass(frozen=True)
class GitIgnore:
    """The rules of a root ``.gitignore``: the last matching pattern decides, ``!`` re-includes.

    A file inside an ignored directory stays ignored (git never looks inside it), so a
    negation cannot bring it back.
    """

    rules: tuple[tuple[PathPattern, bool], ...]

    @classmethod
    def parse(cls, data: bytes | str) -> GitIgnore:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        rules = []
        for raw in text.splitlines()[:10000]:
            line = raw.rstrip("\n\r")
            # Trailing spaces are ignored unless escaped; a leading "#" is a comment.
            stripped = line.rstrip(" ")
            if stripped.endswith("\\") and len(stripped) < len(line):
                stripped += " "
            if not stripped or stripped.startswith("#"):
                continue
            negate = stripped.startswith("!")
            if negate:
                stripped = stripped[1:]
            elif stripped.startswith(("\\!", "\\#")):
                stripped = stripped[1:]
            rules.append((PathPattern.compile(stripped), not negate))
        return cls(tuple(rules))

    def _decide(self, path: str, is_dir: bool) -> bool:
        for pattern, ignore in reversed(self.rules):
            if pattern.matches(path, is_dir):
                return ignore
        return False

    def ignores(self, path: str) -> bool:
        """Whether git would leave the file at ``path`` out of a commit."""
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if self._decide("/".join(parts[:depth]), True):
                return True
        return self._decide(path, False)
