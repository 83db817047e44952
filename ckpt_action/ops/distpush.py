"""push from many ranks: each rank uploads the files of its own local dir, one commit lands.

The steps, every rank in step with the others through a :class:`~ckpt_action.ops.coordination.Session`:

1. each rank checks and hashes its own ``local_dir`` (push's :class:`~ckpt_action.ops.push.LocalDir`);
2. the digests are gathered: a path several ranks hold (a shared filesystem, a file every
   node writes) must have the same digest on each, else the push fails naming the path
   and the ranks; each path gets one owner (the holder with the fewest bytes so far), so a
   shared file is uploaded once;
3. rank 0 creates the repo if needed and reads the head; every rank preuploads the files
   it owns (``HfApi.preupload_lfs_files``) and sends rank 0 the uploaded operations, and
   the bytes of the small files the Hub takes inline in the commit;
4. rank 0 claims the commit (unless a failure was recorded first) and makes it with
   push's own planner, commit loop and proof, its manifest built from the gathered
   digests (it reads no other rank's files); every rank returns its result.

Any failure before the claim means no commit, and every rank raises the same
:class:`~ckpt_action.errors.DistributedError`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT, FileDigest, digest_bytes
from ckpt_action.errors import IntegrityError
from ckpt_action.hub.commits import commit
from ckpt_action.hub.repo import RemoteRepo
from ckpt_action.hub.transport import call
from ckpt_action.ops.coordination import Session
from ckpt_action.ops.push import EXTRA_COMMITS, LocalDir, PushResult, ensure_repo, finish, landed_counts, planner
from ckpt_action.progress import Ticker, bytes_read_since_now

PREUPLOAD_BATCH = 256
"""Files per preupload call (the Hub's own batch of ``preupload_lfs_files``)."""
INLINE_LIMIT = GIT_OID_LIMIT
"""Bytes of one file sent inline in the commit, at most: the Hub stores bigger ones through
LFS, and a Hub asking otherwise would have a rank ship a whole shard to rank 0's memory."""


@dataclass(frozen=True)
class Shipped:
    """What a rank sends the committing rank for one file it owns: the preuploaded
    operation, or the bytes of a file that goes inline in the commit."""

    rel: str
    op: Any = None
    data: bytes | None = None


def assign(scans: list[dict[str, FileDigest]]) -> tuple[dict[str, FileDigest], dict[str, int], str | None]:
    """(every file's digest, its owner rank, the first disagreement as a message or None).

    Each path is uploaded by one of the ranks holding it: the one with the fewest bytes
    assigned so far (the lowest rank on a tie), biggest files first, so ranks sharing a
    filesystem split the upload instead of each sending everything. Every rank computes
    the same answer from the same gathered scans.
    """
    holders: dict[str, list[int]] = {}
    merged: dict[str, FileDigest] = {}
    for rank, scan in enumerate(scans):
        for rel, digest in scan.items():
            first = merged.setdefault(rel, digest)
            if (first.size, first.sha256) != (digest.size, digest.sha256):
                other = holders[rel][0]
                return merged, {}, (f"{rel} differs between ranks {other} and {rank} (sha256 {first.sha256}"
                                    f" vs {digest.sha256}): every rank holding a path must hold the same bytes")
            holders.setdefault(rel, []).append(rank)
    load = [0] * len(scans)
    owners: dict[str, int] = {}
    for rel in sorted(merged, key=lambda r: (-merged[r].size, r)):
        owner = min(holders[rel], key=lambda r: (load[r], r))
        owners[rel] = owner
        load[owner] += merged[rel].size
    return merged, owners, None


def _read_inline(local: LocalDir, rel: str) -> bytes:
    digest = local.digests[rel]
    if digest.size > INLINE_LIMIT:
        raise IntegrityError(f"the Hub asked for {rel} ({digest.size} bytes) inline in the commit; ckpt-action"
                             f" sends at most {INLINE_LIMIT} bytes inline: check the repo's .gitattributes")
    with open(local.paths[rel], "rb") as fh:
        data = fh.read(digest.size + 1)
    if digest_bytes(rel, data).sha256 != digest.sha256:
        raise IntegrityError(f"{rel} in {local.root} changed while it was pushed: stop writing to it before"
                             " pushing it")
    return data


def upload_owned(remote: RemoteRepo, local: LocalDir, subfolder: str, mine: list[str], branch: str,
                 label: str) -> list[Shipped]:
    """Preupload the files this rank owns; what rank 0 needs to commit them."""
    ops = [local.add(subfolder, rel) for rel in mine]
    total = sum(local.digests[rel].size for rel in mine)
    with Ticker(label, total, bytes_read_since_now()):
        for start in range(0, len(ops), PREUPLOAD_BATCH):
            batch = ops[start:start + PREUPLOAD_BATCH]
            call(remote.settings, f"uploading {len(batch)} file(s) of {subfolder}", remote.api.preupload_lfs_files,
                 remote.repo, additions=batch, revision=branch, repo=remote.repo)
    shipped = [Shipped(rel, op=op) if op._upload_mode == "lfs" else Shipped(rel, data=_read_inline(local, rel))
               for rel, op in zip(mine, ops, strict=True)]
    changed = local.refresh(thorough=True)
    if changed:
        raise IntegrityError(f"{changed[0]} in {local.root} changed while it was pushed: stop writing to it"
                             " before pushing it")
    return shipped


def push_distributed(remote: RemoteRepo, local_dir: Path, subfolder: str, session: Session, *,
                     step: int | None = None, private: bool = True, commit_message: str | None = None,
                     branch: str = "main", source: dict[str, str] | None = None) -> PushResult:
    """Called on every rank of ``session``; every rank returns the same result or raises the same error.

    On every rank (a process group is needed, so this example is not run here)::

        with Session(store, rank, world, name="ckpt/0", timeout=300, what="push ckpt-8") as s:
            push_distributed(RemoteRepo(settings, "org/run"), Path("out/checkpoint-8"), "checkpoint-8", s, step=8)
        # -> PushResult(handle=CheckpointHandle(repo='org/run', subfolder='checkpoint-8', revision='3f1c…', ...), ...)
    """
    from huggingface_hub import CommitOperationAdd

    rank = session.rank
    local = session.run(f"hashing {local_dir}", lambda: LocalDir(local_dir, f"push {subfolder}").hash_all())
    scans = session.gather("scan", dict(local.digests))
    assert scans is not None
    merged, owners, problem = assign(scans)
    if problem is not None:
        session.fail(problem)
    if not merged:
        session.fail(f"no rank holds a file of {subfolder}: nothing to push", 2)
    target = None if branch == "main" else branch
    if rank == 0:
        head = session.run("creating the repo", lambda: ensure_repo(remote, target, private))
        session.post("ready", head)
    else:
        head = session.fetch("ready", 0)
    mine = sorted(rel for rel, owner in owners.items() if owner == rank)
    shipped = session.run(f"uploading {len(mine)} file(s)", lambda: upload_owned(
        remote, local, subfolder, mine, branch, f"push {subfolder}: uploading (rank {rank})"))
    gathered = session.gather("upload", shipped, root=0)
    if gathered is None:
        result = session.fetch("result", 0)
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, PushResult)
        return replace(result, local_dir=local_dir)  # the same commit; this rank's own dir
    session.drop("upload")  # the inline bytes: rank 0 holds them now, the store need not
    ops: dict[str, Any] = {}
    for part in gathered:
        for item in part:
            ops[item.rel] = item.op if item.op is not None else CommitOperationAdd(f"{subfolder}/{item.rel}",
                                                                                item.data)
    session.claim_commit()

    def make_commit() -> PushResult:
        planned = planner(remote, subfolder, lambda _have: merged, lambda _sub, rel: ops[rel], step=step,
                          source=source, commit_message=commit_message)
        outcome = commit(remote, planned.plan, what=f"committing {subfolder}", branch=branch, head=head,
                         max_commits=-(-len(merged) // planned.batch_size) + EXTRA_COMMITS)
        uploaded, deleted = landed_counts(outcome, subfolder)
        return finish(remote, subfolder, step, outcome, outcome.commits, uploaded, deleted, local_dir)

    try:
        result = make_commit()
    except Exception as exc:
        error = session.failed_commit(exc)
        session.post("result", error)
        raise error from exc
    session.post("result", result)
    return result

