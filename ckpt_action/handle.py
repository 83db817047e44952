"""The checkpoint handle: a subfolder of a Hub repo pinned to one commit SHA."""

from __future__ import annotations

import re
from dataclasses import dataclass

SHA_RE = re.compile(r"^[0-9a-f]{40}\Z")  # \Z: "$" would accept a trailing newline
CHECKPOINT_RE = re.compile(r"^checkpoint-([0-9]+)\Z")
DEFAULT_ENDPOINT = "https://huggingface.co"


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
