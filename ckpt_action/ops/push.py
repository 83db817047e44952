"""push: make ``repo/<subfolder>/`` exactly equal to a local dir, manifest last.

The push plans against what is on the Hub rather than uploading blindly: at each head
it works out what differs and hands the next batch to :func:`~ckpt_action.hub.commits.commit`, which
pins the commit to that head and, after a conflict or an ambiguous failure, re-reads
what actually landed and asks for a new plan. A big checkpoint goes in several
commits, each marked incomplete in the manifest but the last.

Before it reports a SHA, push proves that the folder at that SHA is what its manifest
says: the local files must not have changed since they were hashed (their stats, and
for files written just before the push, their bytes), and the folder's git tree id at
the SHA must equal the one computed from the manifest (one request). A file that
changed is hashed again and the push converges once more; one that keeps changing is
an error naming it.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.manifest import (
    MANIFEST_NAME,
    FileDigest,
    Manifest,
    digest_bytes,
    digest_files,
    folder_tree_oid,
    matches_remote,
    scan_dir,
)
from ckpt_action.errors import IntegrityError, NotFoundError
from ckpt_action.handle import CheckpointHandle
from ckpt_action.hub.commits import CommitOutcome, CommitPlan, commit
from ckpt_action.hub.repo import RemoteRepo, Snapshot
from ckpt_action.hub.transport import call
from ckpt_action.progress import Ticker, bytes_read_since_now

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


_Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> _Stamp:
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise IntegrityError(f"{path} is not a regular file: push a directory of regular files")
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class LocalDir:
    """The directory being pushed: each file's digest and the stat it was hashed under."""

    def __init__(self, root: Path, label: str) -> None:
        self.root, self.label = root, label
        self.paths: dict[str, Path] = {}
        self.digests: dict[str, FileDigest] = {}
        self.stamps: dict[str, tuple[_Stamp, int]] = {}
        self.changes: Counter[str] = Counter()
        self._hash(scan_dir(root))

    def _hash(self, paths: dict[str, Path]) -> None:
        # The stat is taken before the bytes are read: a write during the read shows in the next stat.
        taken = time.time_ns()
        stamps = {rel: (_stamp(full), taken) for rel, full in paths.items()}
        with Ticker(f"{self.label}: hashing", sum(s[0][0] for s in stamps.values()), bytes_read_since_now()):
            digests = digest_files(paths)
        self.paths.update(paths)
        self.stamps.update(stamps)
        self.digests.update(digests)

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
            out |= {rel for rel, digest in digest_files(racy).items() if digest != self.digests[rel]}
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
            del self.paths[gone], self.digests[gone], self.stamps[gone]
        self._hash({r: now[r] for r in changed if r in now})
        return changed

    def unsettled(self, rel: str) -> IntegrityError:
        return IntegrityError(f"{rel} in {self.root} changed {self.changes[rel]} time(s) while it was pushed, and"
                              " the directory kept changing: stop writing to it before pushing it")

    def moved(self) -> bool:
        """Whether any file changed since it was hashed (stats only, no reading)."""
        return bool(self._changes(thorough=False)[0])

    def add(self, subfolder: str, rel: str) -> Any:
        """The commit operation uploading one file as it was hashed."""
        from huggingface_hub import CommitOperationAdd

        digest = self.digests[rel]
        assert digest.sha256 is not None
        try:
            op = CommitOperationAdd(path_in_repo=f"{subfolder}/{rel}", path_or_fileobj=str(self.paths[rel]))
        except (OSError, ValueError) as exc:
            raise IntegrityError(f"{rel} in {self.root} disappeared while it was pushed ({exc})") from exc
        # Hashed once already, and the Hub must be told what was hashed: if the bytes sent
        # differ, the upload or the proof fails rather than the manifest lying.
        op.upload_info.sha256 = bytes.fromhex(digest.sha256)
        op.upload_info.size = digest.size
        return op


def push(
    remote: RemoteRepo,
    local_dir: Path,
    subfolder: str,
    *,
    step: int | None = None,
    private: bool = True,
    commit_message: str | None = None,
    branch: str = "main",
    source: dict[str, str] | None = None,
) -> PushResult:
    """Push ``local_dir`` to ``subfolder`` of ``remote`` and return the SHA holding it complete.

    >>> push(RemoteRepo(settings, "org/run"), Path("out/checkpoint-300"), "checkpoint-300", step=300)  # doctest: +SKIP
    PushResult(handle=CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', ...), ...)
    """
    local = LocalDir(local_dir, f"push {subfolder}")
    target = None if branch == "main" else branch
    head = ensure_repo(remote, target, private)

    def digests() -> dict[str, FileDigest]:
        local.refresh()
        return local.digests

    plan, batch_size = planner(remote, subfolder, digests, local.add, step=step, source=source,
                               commit_message=commit_message)
    commits = uploaded = deleted = passes = 0
    while True:
        passes += 1
        outcome = commit(remote, plan, what=f"committing {subfolder}", branch=branch, head=head,
                         max_commits=-(-len(local.digests) // batch_size) + EXTRA_COMMITS,
                         replan_on=lambda _exc: local.moved())
        commits += outcome.commits
        up, down = landed_counts(outcome, subfolder)
        uploaded, deleted = uploaded + up, deleted + down
        changed = local.refresh(thorough=True)
        if changed:
            if passes > MAX_CHANGES:
                raise local.unsettled(changed[0])
            head = None  # a file changed after it was hashed: converge again from the head
            continue
        return finish(remote, subfolder, step, outcome, commits, uploaded, deleted, local_dir)


def ensure_repo(remote: RemoteRepo, target: str | None, private: bool) -> str | None:
    """The head of ``target`` (None: main), creating the repo if it does not exist."""
    try:
        return remote.resolve(target)
    except NotFoundError:
        # Only a missing repo gets created, so an existing one keeps its visibility.
        call(remote.settings, "creating the repo", remote.api.create_repo, remote.repo, private=private,
             exist_ok=True, repo=remote.repo)
        return remote.resolve(target)


def planner(remote: RemoteRepo, subfolder: str, digests: Callable[[], dict[str, FileDigest]],
            add: Callable[[str, str], Any], *, step: int | None, source: dict[str, str] | None,
            commit_message: str | None) -> tuple[Callable[[str | None], CommitPlan | None], int]:
    """The planning function :func:`~ckpt_action.hub.commits.commit` calls at each head, and the batch size.

    ``digests()`` answers the checkpoint's files as they are now; ``add(subfolder, rel)``
    the commit operation carrying one of them (read from the local dir, or uploaded
    already by another rank of a distributed push).
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    title = commit_message or f"Push {subfolder}" + (f" (step {step})" if step is not None else "")
    batch_size = remote.settings.max_files_per_commit - 1  # room for the manifest
    manifest_path = f"{subfolder}/{MANIFEST_NAME}"
    first_pending: int | None = None

    def plan(head: str | None) -> CommitPlan | None:
        nonlocal first_pending
        files = digests()
        state = _state(remote, head, subfolder)
        have = state.files if state else {}
        pending = [rel for rel in sorted(files) if not matches_remote(files[rel], have.get(rel))]
        stale = sorted(rel for rel in have if rel not in files)
        complete = Manifest(files=dict(files), step=step, complete=True, source=source)
        current = state.manifest if state else None
        if not pending and not stale and current is not None and current.content_key() == complete.content_key():
            return None
        final = len(pending) <= batch_size
        marker = complete if final else Manifest(files=dict(files), step=step, complete=False, created_at="",
                                                  source=source)
        batch = pending[:batch_size]
        ops: list[Any] = [CommitOperationDelete(f"{subfolder}/{rel}") for rel in stale]
        ops += [add(subfolder, rel) for rel in batch]
        ops.append(CommitOperationAdd(manifest_path, marker.to_json()))
        if first_pending is None:
            first_pending = len(pending)
        parts = -(-first_pending // batch_size)
        part = min(parts, max(0, first_pending - len(pending)) // batch_size + 1)
        return CommitPlan(ops, title + (f" (part {part} of {parts})" if parts > 1 else ""), final=final,
                          description="Written by ckpt-action; the manifest is committed with the last part.",
                          progress=f"push {subfolder}: uploading", upload_bytes=sum(files[r].size for r in batch))

    return plan, batch_size


def landed_counts(outcome: CommitOutcome, subfolder: str) -> tuple[int, int]:
    """(files uploaded, files deleted) by the commits of ``outcome`` that landed."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    manifest_path = f"{subfolder}/{MANIFEST_NAME}"
    uploaded = deleted = 0
    for landed in outcome.landed:
        ops = landed.operations
        uploaded += sum(isinstance(op, CommitOperationAdd) and op.path_in_repo != manifest_path for op in ops)
        deleted += sum(isinstance(op, CommitOperationDelete) for op in ops)
    return uploaded, deleted


def finish(remote: RemoteRepo, subfolder: str, step: int | None, outcome: CommitOutcome, commits: int,
           uploaded: int, deleted: int, local_dir: Path | None = None) -> PushResult:
    """Prove what landed, then the result: the handle of the SHA holding the folder complete."""
    assert outcome.revision is not None
    if outcome.last is not None:  # else the planner's own listing at that head was the proof
        _prove(remote, outcome.revision, subfolder, outcome.last)
    return PushResult(CheckpointHandle(remote.repo, subfolder, outcome.revision, step, remote.settings.endpoint),
                      commits, uploaded, deleted, local_dir)


def _state(remote: RemoteRepo, head: str | None, subfolder: str) -> Snapshot | None:
    """The target folder at head; a manifest we cannot read (corrupt, unknown format) is
    treated as absent, so this push replaces it instead of failing forever."""
    if head is None:
        return None
    try:
        return remote.snapshot(head, subfolder)
    except IntegrityError:
        files = remote.files(head, subfolder)
        files.pop(MANIFEST_NAME, None)
        return Snapshot(head, subfolder, files, None)


def _prove(remote: RemoteRepo, sha: str, subfolder: str, last: CommitPlan) -> None:
    """Raise unless ``subfolder`` at ``sha`` holds exactly what the manifest of ``last`` says.

    One request when the folder's git tree id can be computed from the manifest; when it
    cannot, or the Hub stored a file otherwise than predicted (a repo's own
    .gitattributes), the folder is listed and compared file by file.
    """
    data = next(op.path_or_fileobj for op in last.operations
                if getattr(op, "path_in_repo", None) == f"{subfolder}/{MANIFEST_NAME}")
    assert isinstance(data, bytes)
    manifest = Manifest.from_json(data)
    want = folder_tree_oid(manifest.files, data)
    if want is not None and remote.folder_id(sha, subfolder) == want:
        return
    files = remote.files(sha, subfolder)
    expected = manifest.files | {MANIFEST_NAME: digest_bytes(MANIFEST_NAME, data)}
    problems = [f"{rel} differs" for rel, digest in sorted(expected.items()) if not matches_remote(digest,
                                                                                                 files.get(rel))]
    problems += [f"{rel} is not in the manifest" for rel in sorted(files) if rel not in expected]
    if problems:
        raise IntegrityError(f"after the push, {subfolder}/ at {sha[:12]} is not what was sent ({problems[0]}):"
                             " the Hub did not store the files as uploaded; push again")
