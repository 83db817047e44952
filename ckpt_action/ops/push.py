"""push: make ``repo/<subfolder>/`` exactly equal to a local dir, manifest last.

The push plans against what is in the store rather than uploading blindly: at each head
it works out what differs and hands the next batch to the store's
:meth:`~ckpt_action.stores.base.Store.write` (a repo: one commit pinned to that head; after
a conflict or an ambiguous failure, it re-reads what actually landed and asks for a new
plan). A big checkpoint goes in several writes, each marked incomplete in the manifest but
the last, which publishes the complete manifest through the one finalize
(:func:`~ckpt_action.stores.finalize.finalize`).

Before it reports a SHA, push proves that the folder at that SHA is what its manifest
says: the local files must not have changed since they were hashed (their stats, and
for files written just before the push, their bytes), and the folder's git tree id at
the SHA must equal the one computed from the manifest (one request). A file that
changed is hashed again and the push converges once more; one that keeps changing is
an error naming it.

Over 400 lines on purpose: the local dir's stamps, the plan against the Hub and the proof of
the result are the steps of one loop, which reads best in one module.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass, replace
from pathlib import Path

from ckpt_action.checkpoint.localfiles import open_regular
from ckpt_action.checkpoint.manifest import (
    GIT_OID_LIMIT,
    MANIFEST_NAME,
    FileDigest,
    Manifest,
    RemoteFile,
    digest_bytes,
    digest_files,
    folder_tree_oid,
    scan_dir,
)
from ckpt_action.checkpoint.provenance import PROVENANCE_NAME, Provenance
from ckpt_action.checkpoint.sealing import model_name, seal, with_provenance
from ckpt_action.checkpoint.signing import SIGNATURE_NAME, LoadedSigner
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import confirmed
from ckpt_action.errors import InputError, IntegrityError, LandedError
from ckpt_action.handle import CheckpointHandle
from ckpt_action.ops.card import Row, TagsOf, card_operation
from ckpt_action.progress import Ticker, bytes_read_since_now
from ckpt_action.stores.base import Store
from ckpt_action.stores.finalize import Identity
from ckpt_action.stores.writes import Delete, Final, Put, Write, WriteOutcome

MAX_CHANGES = 3
"""Times one file may change under a push (it is hashed again each time) before push gives up."""
EXTRA_COMMITS = 20
"""Commits beyond the planned batches, for files a concurrent push to the same folder
replaced between two of ours."""
# A file modified just before its stat was taken can change again within the same tick of
# the file system's clock, and then neither its size nor its times show it: such files
# are hashed once more after the upload instead of trusting the stat. Linux stamps files
# from a clock that ticks every few ms; file systems that keep whole seconds (FAT keeps 2)
# get a window to match.
_RACY_NS = 100_000_000
# Files of one batch held open for the client (see LocalDir._pinned): well under the usual
# limit of 1024 descriptors.
_MAX_PINS = 256
_RACY_COARSE_NS = 2_000_000_000


@dataclass(frozen=True)
class PushResult:
    handle: CheckpointHandle
    commits: int
    """Commits this push made (0 for a no-op re-push), including one that landed behind an error."""
    uploaded_files: int
    deleted_files: int
    local_dir: Path | None = None
    """The directory pushed, as checked."""
    signer: str | None = None
    """Who signed the folder's ``model.sig`` (None: pushed unsigned)."""
    left_out: tuple[str, ...] = ()
    """Names at the top of the local dir not uploaded as ckpt-action's own (a pulled dir's
    record, an old manifest, signature or statement: the push wrote its own)."""


_Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> _Stamp:
    # lstat: a file replaced by a link since the scan shows as changed (then refused), never
    # as the stat of what the link points at.
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise IntegrityError(f"{path} is not a regular file: push a directory of regular files")
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class LocalDir:
    """The directory being pushed: each file's digest and the stat it was hashed under.

    Files above GIT_OID_LIMIT (no git id in the manifest, so only their sha256 is needed)
    are not hashed up front: :meth:`settle` hashes those the folder may already hold (same
    path and size: a re-push must find them unchanged without uploading), and uploads the
    rest, taking the sha256 the client computes while it reads them to upload (hf_xet
    hashes while it chunks), so each of their bytes is read once.
    """

    def __init__(self, root: Path, label: str) -> None:
        self.root, self.label = root, label
        self.paths: dict[str, Path] = {}
        self.digests: dict[str, FileDigest] = {}
        self.stamps: dict[str, tuple[_Stamp, int]] = {}
        self.changes: Counter[str] = Counter()
        self.unhashed: set[str] = set()
        """Big files whose digest waits for :meth:`settle`."""
        self.sent: dict[str, Put] = {}
        """Files already uploaded by :meth:`settle`, hashed by that upload."""
        self._pins: list[int] = []
        self._hash(scan_dir(root))

    def _hash(self, paths: dict[str, Path]) -> None:
        # The stat is taken before the bytes are read: a write during the read shows in the next stat.
        taken = time.time_ns()
        stamps = {rel: (_stamp(full), taken) for rel, full in paths.items()}
        later = {rel for rel, (stamp, _taken) in stamps.items() if stamp[0] > GIT_OID_LIMIT}
        now = {rel: full for rel, full in paths.items() if rel not in later}
        with Ticker(f"{self.label}: hashing", sum(stamps[rel][0][0] for rel in now), bytes_read_since_now()):
            digests = digest_files(now)
        for rel in paths:
            self.digests.pop(rel, None)
            self.sent.pop(rel, None)
        self.paths.update(paths)
        self.stamps.update(stamps)
        self.digests.update(digests)
        self.unhashed = (self.unhashed - set(now)) | later

    def hash_all(self) -> LocalDir:
        """Hash the big files too, now: for a push that must know every digest before it
        uploads anything (the ranks of a distributed push agree on them first)."""
        self._hash_now(sorted(self.unhashed))
        self.unhashed.clear()
        return self

    def _hash_now(self, rels: list[str]) -> None:
        """Hash these files (of those whose digest waited) now, with a progress line."""
        if rels:
            with Ticker(f"{self.label}: hashing", sum(self.stamps[rel][0][0] for rel in rels),
                        bytes_read_since_now()):
                self.digests.update(digest_files({rel: self.paths[rel] for rel in rels}))

    def settle(self, store: Store, subfolder: str, have: dict[str, RemoteFile], branch: str) -> None:
        """Give every file a digest, uploading the big ones ``have`` (the folder on the Hub)
        cannot already hold. The stat of each was taken before this read, so a file that
        changes during it is caught after the commit like any other.

        In a bucket every file, small ones too, is uploaded here, before the manifest is
        planned, so that the manifest records each one's Xet hash (the bucket listing's
        only content digest a reader can compare); a file ``have`` holds already, the same
        bytes as far as this store knows, takes the listing's."""
        bucket = store.kind == "bucket"
        if not self.unhashed and not bucket:
            return
        size = {rel: self.stamps[rel][0][0] for rel in self.unhashed}
        same = [rel for rel in sorted(self.unhashed) if (got := have.get(rel)) is not None and got.size == size[rel]]
        self._hash_now(same)
        send = self.unhashed - set(same)
        if bucket:
            for rel in sorted(set(self.digests) - set(self.sent) - send):
                digest, got = replace(self.digests[rel], xet=None), have.get(rel)
                if got is not None and got.xet is not None and confirmed(digest, got):
                    self.digests[rel] = replace(digest, xet=got.xet)
                else:
                    send.add(rel)
        if not send:
            self.unhashed.clear()
            return
        sources = {rel: (self._local(rel), self.digests.get(rel)) for rel in sorted(send)}
        uploaded = store.upload(subfolder, sources, branch=branch, progress=f"{self.label}: uploading",
                                what=f"uploading {subfolder}")
        for rel, up in uploaded.items():  # the digest: what the upload read (hf_xet hashes while it chunks)
            self.digests[rel] = up.digest
            self.sent[rel] = Put(f"{subfolder}/{rel}", up.digest, uploaded=up.token)
        self.unhashed.clear()

    def _changes(self, thorough: bool) -> tuple[list[str], dict[str, Path]]:
        now = scan_dir(self.root)
        out = set(now) ^ set(self.paths)
        racy = {}
        coarse = all(stamp[1] % 1_000_000_000 == 0 for stamp, _taken in self.stamps.values())
        for rel in set(now) & set(self.paths):
            stamp, taken = self.stamps[rel]
            try:
                moved = _stamp(now[rel]) != stamp
            except FileNotFoundError:
                moved = True
            if moved:
                out.add(rel)
            elif thorough and stamp[1] >= taken - (_RACY_COARSE_NS if coarse else _RACY_NS):
                racy[rel] = now[rel]
        if racy:
            out |= {rel for rel, digest in digest_files(racy).items() if digest != self.digests.get(rel)}
        return sorted(out), now

    def refresh(self, *, thorough: bool = False) -> list[str]:
        """Hash again the files added, removed or modified since they were hashed, and name
        them. ``thorough`` also reads again the files modified just before their stat,
        which a stat cannot vouch for."""
        changed, now = self._changes(thorough)
        if not changed:
            return []
        self.changes.update(changed)
        rel, times = self.changes.most_common(1)[0]
        if times > MAX_CHANGES:
            raise self.unsettled(rel)
        for gone in [r for r in changed if r not in now]:
            del self.paths[gone], self.stamps[gone]
            self.digests.pop(gone, None)
            self.sent.pop(gone, None)
            self.unhashed.discard(gone)
        self._hash({r: now[r] for r in changed if r in now})
        return changed

    def unsettled(self, rel: str) -> IntegrityError:
        return IntegrityError(f"{rel} in {self.root} changed {self.changes[rel]} time(s) while it was pushed, and"
                              " the directory kept changing: stop writing to it before pushing it")

    def moved(self) -> bool:
        """Whether any file changed since it was hashed (stats only, no reading)."""
        return bool(self._changes(thorough=False)[0])

    def _pinned(self, rel: str) -> str:
        """A path the client can open that is the file as checked now, whatever replaces it.

        The client opens the path itself, later (after the preupload request): a link put in
        the file's place by then would be followed and its target uploaded. So the file is
        opened here without following links (:func:`open_regular` refuses one) and the
        client gets ``/proc/self/fd/N``, which reopens that very inode. Where there is no
        /proc (or no fd left), the path itself, checked just now.
        """
        path = self.paths[rel]
        fd = open_regular(path)
        if len(self._pins) >= _MAX_PINS or not os.path.exists(f"/proc/self/fd/{fd}"):
            os.close(fd)
            return str(path)
        self._pins.append(fd)
        return f"/proc/self/fd/{fd}"

    def unpin(self) -> None:
        """Close the files opened for the last batch (its commit is over)."""
        while self._pins:
            os.close(self._pins.pop())

    def _local(self, rel: str) -> str:
        try:
            return self._pinned(rel)
        except (OSError, ValueError) as exc:
            raise IntegrityError(f"{rel} in {self.root} disappeared while it was pushed ({exc})") from exc

    def add(self, subfolder: str, rel: str) -> Put:
        """The write of one file as it was hashed (the store is told the digest: if the
        bytes sent differ, the upload or the proof fails rather than the manifest lying)."""
        if rel in self.sent:
            return self.sent[rel]
        digest = self.digests[rel]
        assert digest.sha256 is not None
        return Put(f"{subfolder}/{rel}", digest, local=self._local(rel))


def push(
    store: Store,
    local_dir: Path,
    subfolder: str,
    *,
    step: int | None = None,
    private: bool = True,
    commit_message: str | None = None,
    branch: str = "main",
    source: dict[str, str] | None = None,
    signer: LoadedSigner | None = None,
    promoted_from: str | None = None,
    metrics: dict[str, float] | None = None,
    card: bool = False,
    card_tags: TagsOf | None = None,
    card_tag: str | None = None,
) -> PushResult:
    """Push ``local_dir`` to ``subfolder`` of ``store`` (the one the client opened for the
    command) and return the pin holding it complete.

    With ``signer``, the last commit also writes the provenance statement (listed in the
    manifest) and ``model.sig``, signed from the digests just computed for the manifest.
    ``metrics`` (checked: :func:`~ckpt_action.checkpoint.metrics.check_metrics`) go into the manifest.
    ``card``: the last commit also updates the model card's table of checkpoints (:mod:`~ckpt_action.ops.card`),
    its tags column from ``card_tags``, and ``card_tag`` (a tag the caller makes for this
    commit: promote into another repo) in the pushed folder's row.

    >>> from ckpt_action.stores import RepoStore
    >>> res = push(RepoStore.open(settings, "org/run"), Path("out/sft"), "sft")
    >>> res.handle.subfolder, res.commits, res.uploaded_files
    ('sft', 1, 1)
    >>> push(RepoStore.open(settings, "org/run"), Path("out/sft"), "sft").commits  # identical content: no commit
    0
    """
    local = LocalDir(local_dir, f"push {subfolder}")
    target = None if branch == "main" else branch
    head = store.ensure(target, private)
    provenance = (Provenance.here(store.name, subfolder, step, os.environ, promoted_from=promoted_from)
                  if signer is not None else None)

    def digests(have: dict[str, RemoteFile]) -> dict[str, FileDigest]:
        local.unpin()  # the last batch's commit is over
        local.refresh()
        local.settle(store, subfolder, have, branch)  # big files hashed by their upload (Xet)
        return local.digests

    planned = planner(store, subfolder, digests, local.add, step=step, source=source,
                      commit_message=commit_message, signer=signer, provenance=provenance, sent=local.sent,
                      metrics=metrics, card=card, card_tags=card_tags, card_tag=card_tag)
    made: list[tuple[str, bool]] = []  # (oid, whether final) of each commit of ours that landed
    try:
        commits = uploaded = deleted = passes = 0
        while True:
            passes += 1
            outcome = store.write(planned.plan, what=f"committing {subfolder}", branch=branch, head=head,
                                  max_writes=-(-len(local.paths) // planned.batch_size) + EXTRA_COMMITS,
                                  replan_on=lambda _exc: local.moved(),
                                  on_landed=lambda oid, plan: made.append((oid, plan.final)))
            commits += outcome.writes
            up, down = landed_counts(outcome, subfolder)
            uploaded, deleted = uploaded + up, deleted + down
            changed = local.refresh(thorough=True)
            if changed:
                if passes > MAX_CHANGES:
                    raise local.unsettled(changed[0])
                head = None  # a file changed after it was hashed: converge again from the head
                continue
            return finish(store, subfolder, step, outcome, commits, uploaded, deleted, local_dir,
                          planned.signed_by)
    except InputError as exc:
        if not made:
            raise
        raise after_landing(store, subfolder, *made[-1], exc) from exc
    finally:
        local.unpin()  # the files held open for the client


def after_landing(store: Store, subfolder: str, oid: str, final: bool, exc: InputError) -> LandedError:
    """The local dir refused after a commit of this push landed (a link that appeared while
    the commit was in flight): not "bad input, nothing sent" (exit 2) but a failure naming
    the commit that exists, and what it holds, so nobody takes the repo as untouched."""
    holds = (f"{subfolder}/ complete, as its files were read before the change" if final else
             f"{subfolder}/ unfinished (its manifest marked incomplete, which latest passes over)")
    return LandedError(f"commit {oid} landed in {store.name} holding {holds}; then {exc.args[0]}",
                       revision=oid, param=exc.param)


@dataclass
class Planned:
    """What :func:`planner` answers: the planning function, the batch size, and who signed
    the folder once its last commit was planned."""

    plan: Callable[[str | None], Write | None]
    batch_size: int
    signed_by: str | None = None


def planner(store: Store, subfolder: str, digests: Callable[[dict[str, RemoteFile]], dict[str, FileDigest]],
            add: Callable[[str, str], Put], *, step: int | None, source: dict[str, str] | None,
            commit_message: str | None, signer: LoadedSigner | None = None, provenance: Provenance | None = None,
            sent: Container[str] = (), contributors: tuple[Identity | None, ...] | None = None,
            who: str = "contributor", metrics: dict[str, float] | None = None, card: bool = False,
            card_tags: TagsOf | None = None, card_tag: str | None = None) -> Planned:
    """The planning function the store's :meth:`~ckpt_action.stores.base.Store.write` calls at
    each head, and the batch size.

    ``digests(have)`` answers the checkpoint's files as they are now (``have``: what the
    folder holds at the head); ``add(subfolder, rel)`` the commit operation carrying one of
    them (read from the local dir, or uploaded already, by the push itself or by another rank
    of a distributed push: those named in ``sent`` count no bytes in the progress lines).
    With ``signer``, the last commit writes ``provenance``'s statement, the manifest and
    ``model.sig`` together. The last write publishes the complete manifest through the one
    finalize, which holds it to ``contributors`` (what each writer reported it wrote, named
    ``who``; default: this push alone). ``metrics`` go into the manifest (the marker of an
    unfinished push too). With ``card``, the last write also puts the model card's table of
    checkpoints (:mod:`~ckpt_action.ops.card`), in the same write.
    """
    identity = store.identity(subfolder, step)
    agreed = contributors if contributors is not None else (identity,)
    title = commit_message or f"Push {subfolder}" + (f" (step {step})" if step is not None else "")
    batch_size = store.settings.max_files_per_commit - 1  # room for the manifest
    manifest_path = f"{subfolder}/{MANIFEST_NAME}"
    first_pending: int | None = None
    planned = Planned(lambda head: None, batch_size, signer.identity if signer is not None else None)

    def plan(head: str | None) -> Write | None:
        nonlocal first_pending
        state = _state(store, head, subfolder)
        have = state.files if state else {}
        files, statement = dict(digests(have)), b""
        if provenance is not None:
            files, statement = with_provenance(files, provenance)
        pending = [rel for rel in sorted(files) if not confirmed(files[rel], have.get(rel))]
        stale = sorted(rel for rel in have if rel not in files and not (signer and rel == SIGNATURE_NAME))
        complete = Manifest(files=dict(files), step=step, complete=True, source=source, metrics=metrics or None)
        current = state.manifest if state else None
        unsigned = signer is not None and SIGNATURE_NAME not in have
        if (not pending and not stale and not unsigned and current is not None
                and current.content_key() == complete.content_key()):
            return None
        # The statement goes with the manifest and the signature, in the last commit.
        pending = [rel for rel in pending if rel != PROVENANCE_NAME]
        final = len(pending) <= batch_size
        marker = complete if final else Manifest(files=dict(files), step=step, complete=False, created_at="",
                                                  source=source, metrics=metrics or None)
        batch = pending[:batch_size]
        ops: list[Put | Delete] = [Delete(f"{subfolder}/{rel}") for rel in stale]
        ops += [add(subfolder, rel) for rel in batch]
        if final and signer is not None:
            sealed = seal(signer, complete, statement, model_name(store.name, subfolder))
            planned.signed_by = sealed.signer
            ops += [Put(f"{subfolder}/{PROVENANCE_NAME}", data=sealed.provenance),
                    Put(manifest_path, data=sealed.manifest),
                    Put(f"{subfolder}/{SIGNATURE_NAME}", data=sealed.signature)]
        else:
            ops.append(Put(manifest_path, data=marker.to_json()))
        if final and card:
            row = Row(subfolder, step, None, metrics, True, signer is not None)
            table = card_operation(store, head, add=[row], tags_of=card_tags,
                                   tag=(card_tag, [subfolder]) if card_tag else None)
            ops += [table] if table is not None else []
        if first_pending is None:
            first_pending = len(pending)
        parts = -(-first_pending // batch_size)
        part = min(parts, max(0, first_pending - len(pending)) // batch_size + 1)
        return Write(list(ops), title + (f" (part {part} of {parts})" if parts > 1 else ""), final=final,
                     description="Written by ckpt-action; the manifest is committed with the last part.",
                     progress=f"push {subfolder}: uploading",
                     upload_bytes=sum(files[r].size for r in batch if r not in sent),
                     finalizes=Final(identity, agreed, have, who) if final else None)

    planned.plan = plan
    return planned


def landed_counts(outcome: WriteOutcome, subfolder: str) -> tuple[int, int]:
    """(files uploaded, files deleted) by the writes of ``outcome`` that landed; the files
    push writes itself (the manifest, a signed folder's statement and ``model.sig``) do not count."""
    written = {f"{subfolder}/{name}" for name in (MANIFEST_NAME, PROVENANCE_NAME, SIGNATURE_NAME)}
    uploaded = deleted = 0
    for landed in outcome.landed:
        ops = landed.operations
        uploaded += sum(isinstance(op, Put) and op.path not in written and op.path.startswith(f"{subfolder}/")
                        for op in ops)
        deleted += sum(isinstance(op, Delete) for op in ops)
    return uploaded, deleted


def finish(store: Store, subfolder: str, step: int | None, outcome: WriteOutcome, commits: int,
           uploaded: int, deleted: int, local_dir: Path | None = None, signer: str | None = None) -> PushResult:
    """Prove what landed, then the result: the handle of the pin holding the folder complete."""
    assert outcome.pin is not None
    if outcome.last is not None:  # else the planner's own listing at that head was the proof
        _prove(store, outcome.pin, subfolder, outcome.last)
    return PushResult(CheckpointHandle(store.name, subfolder, outcome.pin, step, store.settings.endpoint),
                      commits, uploaded, deleted, local_dir, signer)


def _state(store: Store, head: str | None, subfolder: str) -> Snapshot | None:
    """The target folder at head; a manifest we cannot read (corrupt, unknown format) is
    treated as absent, so this push replaces it instead of failing forever."""
    if head is None:
        return None
    try:
        return store.snapshot(head, subfolder)
    except IntegrityError:
        files = store.files(head, subfolder)
        files.pop(MANIFEST_NAME, None)
        return Snapshot(head, subfolder, files, None)


def _prove(store: Store, sha: str, subfolder: str, last: Write) -> None:
    """Raise unless ``subfolder`` at ``sha`` holds exactly what the manifest of ``last`` says.

    One request when the folder's git tree id can be computed from the manifest; when it
    cannot, or the Hub stored a file otherwise than predicted (a repo's own
    .gitattributes), the folder is listed and compared file by file. A difference at a
    repo's commit (ours, pinned to its parent) is the Hub's; in a store read as it is now (a
    bucket, whose write checked the folder after the manifest landed) it is another
    writer's, and the message says so.
    """
    sent = {op.path: op.data for op in last.operations if isinstance(op, Put)}
    data = sent[f"{subfolder}/{MANIFEST_NAME}"]
    assert isinstance(data, bytes)
    manifest = Manifest.from_json(data)
    listed = dict(manifest.files)
    signature = sent.get(f"{subfolder}/{SIGNATURE_NAME}")
    if isinstance(signature, bytes):  # the one file of a signed folder its manifest does not list
        listed[SIGNATURE_NAME] = digest_bytes(SIGNATURE_NAME, signature)
    want = folder_tree_oid(listed, data)
    if want is not None and store.folder_id(sha, subfolder) == want:
        return
    files = store.files(sha, subfolder)
    expected = listed | {MANIFEST_NAME: digest_bytes(MANIFEST_NAME, data)}
    problems = [f"{rel} differs" for rel, digest in sorted(expected.items()) if not confirmed(digest,
                                                                                                 files.get(rel))]
    problems += [f"{rel} is not in the manifest" for rel in sorted(files) if rel not in expected]
    if problems and not store.fixed_pins:
        # The write checked the folder after its manifest landed: it changed since.
        raise IntegrityError(f"after the push, {subfolder}/ in {store.name} no longer holds what was sent"
                             f" ({problems[0]}): another writer changed it after this push published it (two"
                             " pushes to one folder at once?); push again once the other writer is done")
    if problems:  # our own commit, pinned to its parent (a race is refused, 412, and re-planned)
        raise IntegrityError(f"after the push, {subfolder}/ at {sha[:12]} is not what was sent ({problems[0]}):"
                             " the Hub did not store the files as uploaded; push again")
