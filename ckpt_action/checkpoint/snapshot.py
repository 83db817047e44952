"""What a store holds of one checkpoint folder at one pin: its files and its manifest.

Store-neutral: a repo's snapshot is read at a commit SHA (:class:`~ckpt_action.stores.hub.repo.RemoteRepo`),
a bucket's at its manifest's digest; the operations judge either the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_action.checkpoint.manifest import Manifest, RemoteFile
from ckpt_action.checkpoint.verdict import Verdict, judge_folder


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

    bucket = False
    """Read from a Storage Bucket, where a folder without a manifest is never complete."""

    def problems(self, manifests_here: bool = False) -> list[str]:
        """Why this snapshot is not a complete checkpoint ([] when it is): the one verdict,
        :func:`~ckpt_action.checkpoint.verdict.judge_folder` (``manifests_here``: other
        ``checkpoint-N`` folders of its repo have a manifest)."""
        return list(self.verdict(manifests_here).problems)

    def verdict(self, manifests_here: bool = False) -> Verdict:
        return judge_folder(self.manifest, self.files, bucket=self.bucket, manifests_here=manifests_here)
