"""The name rules: repo ids, folder and ref names, endpoints, and the checks built on them.

Each failure is an :class:`~ckpt_action.errors.InputError` whose message says what to
change. Nothing here touches the network or the disk: checks of a local dir live in
:mod:`ckpt_action.disk`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from ckpt_action.errors import InputError
from ckpt_action.handle import DEFAULT_ENDPOINT, SHA_RE, step_of

# The Hub's own rule (huggingface_hub.utils.validate_repo_id), plus a mandatory owner:
# a bare name would resolve against whoever the token belongs to, which CI jobs
# sharing a checkpoint repo must not depend on.
# Every pattern here is used with fullmatch: "$" alone would let a trailing newline through.
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_RE = re.compile(rf"{_REPO_PART}/{_REPO_PART}")
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=@-]{0,199}")
_REF_RE = re.compile(r"[A-Za-z0-9._/-]{1,200}")
# What the Hub refuses in a file name, and what would confuse a log or a shell: control
# characters (newlines included) and backslashes.
BAD_NAME_RE = re.compile(r"[\x00-\x1f\x7f\\]")
COMMIT_MESSAGE_MAX = 1000
# The Hub's limit on files in one repo.
MAX_PUSH_FILES = 100_000
# Names with a meaning to git, the Hub or the client's local-dir cache.
_RESERVED_SEGMENTS = {".git", ".cache", ".huggingface", ".gitattributes", ".gitignore"}
HUB_HOSTS = {"huggingface.co", "hf.co", "www.huggingface.co"}


def repo_id(value: str | None) -> str:
    """Check a repo id of the form ``owner/name``.

    >>> repo_id("org/llama-sft")
    'org/llama-sft'
    """
    if not value:
        raise InputError("--repo is required: give the Hub model repo as OWNER/NAME")
    if not _REPO_RE.fullmatch(value) or "--" in value or ".." in value or value.endswith(".git"):
        raise InputError(
            f"--repo {value!r} is not a valid repo id: use OWNER/NAME with letters, digits, '-', '_' or '.'"
            " (no '--' or '..', not ending in .git)"
        )
    return value


def subfolder(value: str, *, flag: str = "--subfolder") -> str:
    """Check a subfolder path inside the repo (``sft``, ``checkpoint-1200``, ``release/v1``).

    >>> subfolder("checkpoint-1200")
    'checkpoint-1200'
    """
    if value is None or value.strip() == "":
        raise InputError(f"{flag} is empty: give a folder name such as checkpoint-100 or sft")
    if "\\" in value:
        raise InputError(f"{flag} {value!r} contains a backslash: use '/' between folder names")
    if value.startswith("/"):
        raise InputError(f"{flag} {value!r} is absolute: give a path inside the repo, e.g. checkpoint-100")
    value = value.rstrip("/")
    parts = value.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InputError(f"{flag} {value!r} has an empty, '.' or '..' segment: name a plain folder")
        if part in _RESERVED_SEGMENTS:
            raise InputError(f"{flag} {value!r} uses the reserved name {part!r}: choose another folder name")
        if not _SEGMENT_RE.fullmatch(part):
            raise InputError(
                f"{flag} {value!r} has an unsupported segment {part!r}: use letters, digits and ._+=@-"
                " (not starting with '.' or '-')"
            )
    return value


def step(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise InputError(f"--step {value} is negative: give the training step as a whole number >= 0")
    return value


def push_target(sub: str | None, stp: int | None) -> tuple[str, int | None]:
    """Derive (subfolder, step) for push: ``--step N`` alone means ``checkpoint-N``.

    >>> push_target(None, 300)
    ('checkpoint-300', 300)
    >>> push_target("checkpoint-300", None)
    ('checkpoint-300', 300)
    """
    stp = step(stp)
    if sub is None:
        if stp is None:
            raise InputError("push needs --subfolder or --step: e.g. --step 1200 pushes to checkpoint-1200/")
        return f"checkpoint-{stp}", stp
    sub = subfolder(sub)
    implied = step_of(sub)
    if implied is not None and stp is not None and implied != stp:
        raise InputError(
            f"--step {stp} disagrees with --subfolder {sub}: drop one, or make them name the same step"
        )
    return sub, stp if stp is not None else implied


def revision(value: str | None, flag: str = "--revision") -> str | None:
    """Check a commit SHA, branch or tag name.

    >>> revision("main"), revision("a" * 40) == "a" * 40
    ('main', True)
    """
    if value is None:
        return None
    if SHA_RE.fullmatch(value):
        return value
    if not _REF_RE.fullmatch(value) or ".." in value or value.startswith("/") or value.endswith("/"):
        what = "a commit SHA, branch or tag name" if flag == "--revision" else "a valid branch or tag name"
        raise InputError(f"{flag} {value!r} is not {what}")
    return value


def commit_message(value: str) -> str:
    """A commit title: one line, bounded, no control characters."""
    if not value.strip() or BAD_NAME_RE.search(value.replace("\\", "")) or len(value) > COMMIT_MESSAGE_MAX:
        raise InputError(f"--commit-message must be one non-empty line of at most {COMMIT_MESSAGE_MAX} characters"
                         " without control characters")
    return value


def endpoint(value: str | None) -> str:
    value = (value or DEFAULT_ENDPOINT).rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--endpoint {value!r} is not an http(s) URL: e.g. https://huggingface.co")
    if parts.username or parts.password:
        raise InputError("--endpoint must not carry credentials: pass the token with HF_TOKEN or --token")
    return value


def is_public_hub(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() in HUB_HOSTS


def token_for_write(token: str | None, url: str) -> None:
    if not token and is_public_hub(url):
        raise InputError("writing to the Hugging Face Hub needs a token: set HF_TOKEN (or pass --token)")


def positive(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        raise InputError(f"{flag} {value} must be at least 1")
    return value


def safe_relative(path: str) -> bool:
    """True when a repo path can be written under a target without escaping it.

    >>> safe_relative("a/b.bin"), safe_relative("../x"), safe_relative("/abs")
    (True, False, False)
    """
    if not path or "\\" in path or "\x00" in path or path.startswith("/"):
        return False
    pure = PurePosixPath(path)
    return not pure.is_absolute() and all(p not in ("", ".", "..") for p in path.split("/"))
