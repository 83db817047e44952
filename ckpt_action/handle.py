"""The checkpoint handle: a subfolder of a Hub repo pinned to one commit SHA."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard

from .errors import IntegrityError, quoted

# \A...\Z, not ^...$: "$" also matches before a trailing newline. [0-9], not \d: \d takes
# any Unicode digit, which int() then reads as a step.
SHA_RE = re.compile(r"\A[0-9a-f]{40}\Z")
# The biggest step: 18 digits, so it fits a signed 64-bit int wherever a step goes (JSON
# readers, W&B, the outputs). One bound for every writer and reader: the pattern that
# finds checkpoint-N folders stops at it, push refuses past it, and a manifest, pointer or
# handle naming more is refused, so nothing pushed is invisible to latest, list or prune.
MAX_STEP = 10**18 - 1
CHECKPOINT_RE = re.compile(rf"\Acheckpoint-([0-9]{{1,{len(str(MAX_STEP))}}})\Z")
# A file's sha256 as the manifest, the Hub's listing, the pull record and the cache spell it.
SHA256_RE = re.compile(r"\A[0-9a-f]{64}\Z")
# A checkpoint in a Storage Bucket is pinned by the sha256 of its manifest as stored.
BUCKET_PIN_RE = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
BUCKET_SCHEME = "hf://buckets/"
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


def is_step(value: object) -> TypeGuard[int]:
    """A step as every reader takes it: a whole number no bigger than :data:`MAX_STEP`.

    >>> is_step(1200), is_step(MAX_STEP + 1), is_step(-1)
    (True, False, False)
    """
    return is_whole(value) and value <= MAX_STEP


def step_of(subfolder: str) -> int | None:
    """The N of a ``checkpoint-N`` subfolder, else None.

    >>> step_of("checkpoint-1200"), step_of("sft")
    (1200, None)
    """
    m = CHECKPOINT_RE.match(subfolder)
    return int(m.group(1)) if m else None


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
        if self.repo.startswith(BUCKET_SCHEME):
            if not BUCKET_PIN_RE.match(self.revision):
                raise IntegrityError(f"the pin of {self.repo}/{self.subfolder} is not sha256:<64 hex>"
                                     f" ({quoted(self.revision, 80)}); refusing to use it")
        else:
            commit_id(self.revision, f"{self.repo}/{self.subfolder}")
        if self.step is not None and not is_step(self.step):
            raise IntegrityError(f"the step of {self.subfolder} is not a whole number from 0 to {MAX_STEP}"
                                 f" ({quoted(self.step, 40)})")

    @property
    def hub_url(self) -> str:
        if self.repo.startswith(BUCKET_SCHEME):  # a bucket has no commits: the folder's page
            org, name, *prefix = self.repo[len(BUCKET_SCHEME):].split("/", 2)
            path = "/".join([*prefix, self.subfolder])
            return f"{self.endpoint.rstrip('/')}/buckets/{org}/{name}/tree/{path}"
        return f"{self.endpoint.rstrip('/')}/{self.repo}/tree/{self.revision}/{self.subfolder}"

    def to_dict(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "subfolder": self.subfolder,
            "revision": self.revision,
            "step": self.step,
            "hub_url": self.hub_url,
        }
