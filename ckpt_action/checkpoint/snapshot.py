"""What a store holds of one checkpoint folder at one pin: its files and its manifest.

Store-neutral: a repo's snapshot is read at a commit SHA (:class:`~ckpt_action.stores.hub.repo.RemoteRepo`),
a bucket's at its manifest's digest; the operations judge either the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_action.checkpoint.manifest import Manifest, RemoteFile


@dataclass(frozen=True)
class Snapshot:
    """A subfolder's files at one SHA, and its manifest if it has one."""

    revision: str
    subfolder: str
    files: dict[str, RemoteFile]
    manifest: Manifest | None
    manifest_bytes: bytes | None = None

    @property
    def exists(self) -> bool:
        return bool(self.files) or self.manifest is not None

    def problems(self) -> list[str]:
        """Why this snapshot is not a complete checkpoint ([] when it is).

        Without a manifest (a folder written by Trainer or ``hf upload``) there is nothing
        to check against, and the folder counts as complete if it holds files.
        """
        if self.manifest is None:
            return [] if self.files else ["the folder is empty"]
        if not self.manifest.complete:
            return ["its push has not finished (manifest marked incomplete)"]
        return self.manifest.mismatches(self.files)
