"""The one finalize: the gate every writer publishes a complete manifest through.

A checkpoint becomes visible (``latest`` takes it, ``pull`` hands it over) the moment its
complete manifest is published: the commit carrying it, in a repo; the manifest written
last, alone, in a bucket. Every writer reaches that moment through a store's write (a
single push, rank 0 of a multi-rank push for every rank, the DCP storage writer through
that push, the Trainer callback through push, promote), and the store calls
:func:`finalize` with the manifest it is about to publish, the checkpoint's identity,
what every contributor reported, and what the folder will hold once it is published. It
refuses, and nothing is published, unless

(a) the identity (store, folder, step) is the one every contributor reported, and the
    one the manifest itself states (its step); and
(b) every file the manifest lists is in what is about to be published, with the listed
    size and digest (sha256 where both sides know it, else the git blob id; and the Xet
    hash where both name one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from ckpt_action.checkpoint.manifest import FileDigest, Manifest, RemoteFile
from ckpt_action.checkpoint.verdict import confirmed
from ckpt_action.errors import IntegrityError, UnreadableManifest, quoted


class FinalizeRefused(IntegrityError):
    """A manifest the one finalize would not publish; nothing was published."""


@dataclass(frozen=True)
class Identity:
    """Which checkpoint a contributor writes: the store (endpoint and repo or bucket), the
    folder, and the step."""

    store: str
    folder: str
    step: int | None

    def to_dict(self) -> dict[str, object]:
        return {"store": self.store, "folder": self.folder, "step": self.step}

    @classmethod
    def from_dict(cls, raw: object) -> Identity | None:
        """An identity another contributor reported (data from outside), or None when it is
        not one."""
        if not isinstance(raw, dict) or set(raw) != {"store", "folder", "step"}:
            return None
        store, folder, step = raw["store"], raw["folder"], raw["step"]
        if not isinstance(store, str) or not isinstance(folder, str):
            return None
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            return None
        return cls(store, folder, step)


def _same(want: FileDigest, got: FileDigest | RemoteFile | None) -> bool:
    if isinstance(got, RemoteFile) or got is None:
        return confirmed(want, got)
    if got.size != want.size or (want.xet is not None and got.xet is not None and got.xet != want.xet):
        return False
    if want.sha256 is not None and got.sha256 is not None:
        return want.sha256 == got.sha256
    return want.git_oid is not None and got.git_oid == want.git_oid


def disagreement(identity: Identity, contributors: Sequence[Identity | None], who: str = "contributor") -> str | None:
    """The first contributor whose identity is not ``identity``, as a message, or None;
    ``who`` names them (``rank``: the n-th contributor is rank n)."""
    if not contributors:
        return "no contributor reported which checkpoint it wrote"
    for n, theirs in enumerate(contributors):
        if theirs is None:
            return f"{who} {n} reported no checkpoint identity ckpt-action can read"
        for f in fields(Identity):
            mine, other = getattr(identity, f.name), getattr(theirs, f.name)
            if mine != other:
                return (f"{who} {n} wrote {f.name} {_shown(other)}, not {_shown(mine)}: every {who} must write"
                        " the same checkpoint")
    return None


def _shown(value: object) -> str:
    return str(value) if isinstance(value, int) else quoted(value, 80)


def finalize(identity: Identity, manifest: bytes, *, contributors: Sequence[Identity | None],
             publishing: Mapping[str, FileDigest | RemoteFile], who: str = "contributor") -> Manifest:
    """Check that ``manifest`` (its bytes, as they will be published) may be published for
    ``identity``; the manifest, parsed. ``contributors``: the identity each writer of the
    checkpoint reported (a push alone: its own). ``publishing``: every file the folder will
    hold once the manifest is published (relative paths), as the store knows it. ``who``
names the contributors in the message (``rank``).

    >>> from ckpt_action.checkpoint.manifest import digest_bytes
    >>> me = Identity("http://hub/org/run", "checkpoint-8", 8)
    >>> a = digest_bytes("a.bin", b"a")
    >>> finalize(me, Manifest({"a.bin": a}, step=8).to_json(), contributors=[me], publishing={}).step
    Traceback (most recent call last):
    ...
    ckpt_action.stores.finalize.FinalizeRefused: not publishing checkpoint-8/: a.bin is missing; nothing was published
    """
    def refuse(why: str) -> FinalizeRefused:
        return FinalizeRefused(f"not publishing {identity.folder}/: {why}; nothing was published")

    problem = disagreement(identity, contributors, who)
    if problem is not None:
        raise refuse(problem)
    try:
        parsed = Manifest.from_json(manifest)
    except UnreadableManifest as exc:
        raise refuse(str(exc)) from exc
    if not parsed.complete:
        raise refuse("its manifest is marked incomplete")
    if parsed.step != identity.step:
        raise refuse(f"its manifest states step {quoted(parsed.step, 40)}, not {quoted(identity.step, 40)}")
    for rel, want in sorted(parsed.files.items()):
        got = publishing.get(rel)
        if got is None:
            raise refuse(f"{rel} is missing")
        if not _same(want, got):
            raise refuse(f"{rel} is not the file the manifest lists ({got.size} bytes, manifest says"
                         f" {want.size}, or another digest)")
    return parsed
