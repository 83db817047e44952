"""The store-neutral writes: what a writer hands :meth:`~ckpt_action.stores.base.Store.write`
(:class:`Put`, :class:`Delete`, :class:`Copy` in a :class:`Write`) and what it answers
(:class:`WriteOutcome`). One type for every store: a repo's commit primitive
(:func:`ckpt_action.stores.hub.commits.commit`) takes these very writes and turns each
operation into huggingface_hub's as it sends the commit, so it sits below the Hub access
that uses it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ckpt_action.checkpoint.manifest import FileDigest, RemoteFile
from ckpt_action.stores.finalize import Identity

Pin = str
"""A reader's pin: a 40-hex commit SHA (repo) or ``sha256:<64 hex>`` of a manifest (bucket)."""
LIVE: Pin = "live"
"""A bucket's :meth:`~ckpt_action.stores.base.Store.resolve` of no revision: its listing as it is now."""


@dataclass(frozen=True)
class Put:
    """Write one file at ``path`` (from the store's root). Exactly one source: ``data``
    (bytes in memory), ``local`` (a path the store opens), ``uploaded`` (the token
    :meth:`~ckpt_action.stores.base.Store.upload` answered), or none of them: the file was uploaded already by
    another contributor (another rank), and ``digest`` says what it is."""

    path: str
    digest: FileDigest | None = None
    data: bytes | None = None
    local: str | None = None
    uploaded: Any = None
    inline: bool = False
    """``data`` that a contributor's upload found the store takes in the write itself."""


@dataclass(frozen=True)
class Delete:
    """Delete the file at ``path``, or the whole folder when ``path`` ends in ``/``."""

    path: str


@dataclass(frozen=True)
class Copy:
    """Copy ``src`` as it is at ``pin`` to ``dst``, server-side."""

    src: str
    dst: str
    pin: Pin
    file: RemoteFile


Operation = Put | Delete | Copy


@dataclass(frozen=True)
class Final:
    """A write that publishes a complete manifest: what :func:`~.finalize.finalize` checks."""

    identity: Identity
    contributors: tuple[Identity | None, ...]
    base: Mapping[str, RemoteFile]
    """The folder's files (relative) at the pin the write was planned at; the write adds to
    and deletes from them."""
    who: str = "contributor"
    """How the messages name the contributors (``rank``)."""


@dataclass(frozen=True)
class Write:
    """The next write a writer wants at some pin (a repo: one commit)."""

    operations: list[Operation]
    title: str
    final: bool = True
    """Once this write lands the writer is done: no re-plan, no re-read of the head."""
    description: str = ""
    progress: str | None = None
    """Label of the progress lines while the write uploads (``push checkpoint-8: uploading``)."""
    upload_bytes: int = 0
    """Bytes of local files the write uploads, for those lines."""
    finalizes: Final | None = None
    """Set when this write publishes a complete manifest."""


@dataclass(frozen=True)
class WriteOutcome:
    pin: Pin | None
    """What holds the result (a repo: the head; None only if the branch never existed and
    the writer had nothing to write)."""
    landed: list[Write] = field(default_factory=list)
    """Writes that landed: answered OK, or found after an ambiguous failure."""
    last: Write | None = None
    """The write the writer ended on, answered OK; None when it ended on the planner finding
    the pin already right (its own read is then the proof)."""

    @property
    def writes(self) -> int:
        return len(self.landed)
