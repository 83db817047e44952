"""The checkpoint handle: a subfolder of a Hub repo pinned to one commit SHA."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard
from urllib.parse import urlsplit

from .errors import InputError, IntegrityError, quoted

# \A...\Z, not ^...$: "$" also matches before a trailing newline. [0-9], not \d: \d takes
# any Unicode digit, which int() then reads as a step.
SHA_RE = re.compile(r"\A[0-9a-f]{40}\Z")
CHECKPOINT_RE = re.compile(r"\Acheckpoint-([0-9]{1,18})\Z")
DEFAULT_ENDPOINT = "https://huggingface.co"


def commit_id(value: object, what: str) -> str:
    """A commit id the Hub answered (a ref's target, a commit's oid), checked before use:
    40 lowercase hex, or the command fails rather than print or pin anything else.

    >>> commit_id("a" * 40, "main") == "a" * 40
    True
    """
    if isinstance(value, str) and SHA_RE.match(value):
        return value
    raise IntegrityError(f"the Hub answered a malformed commit id for {what} ({quoted(value, 60)}):"
                         " not 40 lowercase hex; refusing to use it")


def is_whole(value: object) -> TypeGuard[int]:
    """An int >= 0, as steps and sizes are (a bool is not one, though Python calls it an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def step_of(subfolder: str) -> int | None:
    """The N of a ``checkpoint-N`` subfolder, else None.

    >>> step_of("checkpoint-1200"), step_of("sft")
    (1200, None)
    """
    m = CHECKPOINT_RE.match(subfolder)
    return int(m.group(1)) if m else None


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, the port only when not the scheme's default.

    >>> origin("HTTPS://Huggingface.co:443/org/run")
    'https://huggingface.co'
    """
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port
    except ValueError:  # not a port at all: an origin nothing else has
        return url
    port = port if port not in (None, default) else None
    return f"{parts.scheme}://{(parts.hostname or '').lower()}" + (f":{port}" if port else "")


def check_origin(named: str, configured: str, *, what: str = "the handle", flag: str = "endpoint=") -> None:
    """The token goes only to the configured endpoint: a handle or pointer naming another
    host is refused, naming both origins. Setting the endpoint (``flag``) to its host is
    the way to trust it. The CLI and the API both apply this one rule.

    >>> check_origin("http://127.0.0.1:8000", "http://127.0.0.1:8000/")
    """
    if origin(named) != origin(configured):
        raise InputError(
            f"{what} names the Hub at {quoted(origin(named), 120)}, but the configured endpoint is"
            f" {origin(configured)}: pass {flag}{'' if flag.endswith('=') else ' '}{quoted(origin(named), 120)}"
            " explicitly if that host is really trusted with the token")


@dataclass(frozen=True)
class CheckpointHandle:
    """Where a checkpoint lives: ``repo/subfolder`` at commit ``revision`` (40-hex).

    >>> h = CheckpointHandle("org/run", "checkpoint-5", "a" * 40, 5, "http://127.0.0.1:8000")
    >>> h.hub_url
    'http://127.0.0.1:8000/org/run/tree/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/checkpoint-5'
    """

    repo: str
    subfolder: str
    revision: str
    step: int | None = None
    endpoint: str = DEFAULT_ENDPOINT

    def __post_init__(self) -> None:
        # The last gate before outputs: whatever path built this handle, the revision
        # printed, written to GITHUB_OUTPUT and pinned is a commit id, the step a number.
        commit_id(self.revision, f"{self.repo}/{self.subfolder}")
        if self.step is not None and not is_whole(self.step):
            raise IntegrityError(f"the step of {self.subfolder} is not a whole number >= 0 ({quoted(self.step, 40)})")

    @property
    def hub_url(self) -> str:
        return f"{self.endpoint.rstrip('/')}/{self.repo}/tree/{self.revision}/{self.subfolder}"

    def to_dict(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "subfolder": self.subfolder,
            "revision": self.revision,
            "step": self.step,
            "hub_url": self.hub_url,
        }
