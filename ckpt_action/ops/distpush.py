"""push from many ranks: each rank uploads the files of its own local dir, one commit lands.

The steps, every rank in step with the others through a :class:`~ckpt_action.ops.coordination.Session`:

1. each rank checks and hashes its own ``local_dir`` (push's :class:`~ckpt_action.ops.push.LocalDir`);
2. the digests are gathered: a path several ranks hold (a shared filesystem, a file every
   node writes) must have the same digest on each, else the push fails naming the path
   and the ranks; each path gets one owner (the holder with the fewest bytes so far), so a
   shared file is uploaded once;
3. rank 0 creates the repo if needed and reads the head; every rank uploads the files it
   owns (the store's :meth:`~ckpt_action.stores.base.Store.upload`) and sends rank 0 which
   checkpoint it wrote (its identity: store, folder, step), which of its files went through
   the upload, and the bytes of the small files the store takes inline in the commit;
4. rank 0 claims the commit (unless a failure was recorded first) and makes it with
   push's own planner, the store's write and push's proof, its manifest built from the
   gathered digests (it reads no other rank's files). The write publishes the manifest
   through the one finalize (:func:`~ckpt_action.stores.finalize.finalize`), which refuses
   unless every rank reported the identity rank 0 writes and every file the manifest lists
   is in the commit or the folder with its digest; every rank returns its result.

Before all of it the ranks :func:`agree` on what is pushed (endpoint, repo, folder, step,
branch, privacy, message): a rank that differs fails every rank before any upload. What
another rank sends is data from the job's store (see :mod:`.coordination`): rank 0 makes
every commit operation itself, under the agreed folder, from the gathered digests,
taking from each rank only which of its own files went through LFS and the bytes of
those sent inline, each checked against its agreed digest.

Any failure before the claim means no commit, and every rank raises the same
:class:`~ckpt_action.errors.DistributedError`.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT, FileDigest, digest_bytes, parse_files
from ckpt_action.errors import IntegrityError, param, quoted, unrendered
from ckpt_action.handle import BUCKET_PIN_RE, SHA256_RE, SHA_RE, CheckpointHandle, is_whole
from ckpt_action.ops.coordination import Session
from ckpt_action.ops.push import EXTRA_COMMITS, LocalDir, PushResult, finish, landed_counts, planner
from ckpt_action.stores.base import Store
from ckpt_action.stores.finalize import Identity
from ckpt_action.stores.writes import LIVE, Put

INLINE_LIMIT = GIT_OID_LIMIT
"""Bytes of one file sent inline in the commit, at most: the Hub stores bigger ones through
LFS, and a Hub asking otherwise would have a rank ship a whole shard to rank 0's memory."""


IDENTITY = ("endpoint", "repo", "step", "subfolder", "branch", "private", "commit_message")
"""What every rank must push alike, each named as the parameter that sets it: a rank that
differs would put its files in another folder, repo or commit. ``step`` before ``subfolder``:
a folder named after the step differs because the step does."""


def identity(store: Store, subfolder: str, *, step: int | None, private: bool,
             commit_message: str | None, branch: str = "main") -> dict[str, object]:
    """This rank's answer to "what are we pushing?", compared across ranks before any upload."""
    return {"endpoint": store.settings.endpoint, "repo": store.name, "subfolder": subfolder, "step": step,
            "branch": branch, "private": private, "commit_message": commit_message}


def disagreement(identities: list[object]) -> str | None:
    """The first thing a rank pushes otherwise than rank 0, as a message, or None.

    >>> from ckpt_action.errors import render
    >>> render(disagreement([{"step": 7}, {"step": 7}, {"step": 8}]), "cli")
    "rank 2 disagrees with rank 0 about --step: '8' vs '7'; every rank must push the same checkpoint (rank 0: '7')"
    """
    first = identities[0]
    for rank, mine in enumerate(identities):
        if not isinstance(mine, dict) or not isinstance(first, dict):
            return f"rank {rank}'s part of the agreement in the job's store is not ckpt-action's"
        for key in IDENTITY:
            if mine.get(key) != first.get(key):
                theirs, ours = quoted(mine.get(key), 80), quoted(first.get(key), 80)
                return (f"rank {rank} disagrees with rank 0 about {param(key)}: {theirs} vs {ours}; every rank"
                        f" must push the same checkpoint (rank 0: {ours})")
    return None


def _scan(session: Session, rank: int, raw: object) -> dict[str, FileDigest]:
    """A rank's digests, as gathered: a manifest's ``files`` (paths and hashes checked), each with its sha256."""
    try:
        files = parse_files(raw)
    except ValueError as exc:
        session.reject(rank, "scan", str(exc))
    if any(d.sha256 is None for d in files.values()):
        session.reject(rank, "scan", "a file without its sha256")
    return files


def _shipped(session: Session, rank: int, report: object, mine: dict[str, FileDigest],
             bucket: bool = False) -> tuple[Identity | None, dict[str, bytes | str | None]]:
    """What ``rank`` says it uploaded: (the checkpoint it says it wrote, for the one finalize
    to hold to rank 0's; its files), checked against what it was given to upload (``mine``,
    from the gathered digests): each path of its own once, and inline bytes only of the
    size and sha256 agreed; None for a file uploaded through LFS."""
    if not isinstance(report, dict) or set(report) != {"identity", "files"}:
        session.reject(rank, "upload", "not a report of the checkpoint it wrote and its files")
    raw = report["files"]
    if not isinstance(raw, dict) or set(raw) != set(mine):
        session.reject(rank, "upload", f"it does not name exactly the {len(mine)} file(s) that rank uploads")
    out: dict[str, bytes | str | None] = {}
    for rel, value in raw.items():
        if value is None:
            out[rel] = None
            continue
        if bucket and isinstance(value, dict):  # a bucket: the Xet hash the rank uploaded, which the finalize checks
            xet = value.get("xet")
            if set(value) != {"xet"} or not isinstance(xet, str) or not SHA256_RE.match(xet):
                session.reject(rank, "upload", f"the Xet hash of {quoted(rel)} is not 64 lowercase hex")
            out[rel] = xet
            continue
        digest = mine[rel]
        if not isinstance(value, str) or len(value) > 4 * (-(-INLINE_LIMIT // 3)):
            session.reject(rank, "upload", f"the inline bytes of {quoted(rel)} are not base64 of at most"
                                           f" {INLINE_LIMIT} bytes")
        try:
            data = base64.b64decode(value, validate=True)
        except ValueError:
            session.reject(rank, "upload", f"the inline bytes of {quoted(rel)} are not base64")
        if digest_bytes(rel, data).sha256 != digest.sha256:
            session.reject(rank, "upload", f"the inline bytes of {quoted(rel)} are not the ones it hashed")
        out[rel] = data
    return Identity.from_dict(report["identity"]), out


def _operation(subfolder: str, rel: str, digest: FileDigest, data: bytes | str | None) -> Put:
    """The write of one file, made by the committing rank from agreed facts: under the
    agreed folder, with the gathered digest (an upload another rank made), or the inline
    bytes checked against it."""
    if isinstance(data, str):  # a bucket: in place under its path already, by this Xet hash
        return Put(f"{subfolder}/{rel}", digest, uploaded=data)
    if data is not None:
        return Put(f"{subfolder}/{rel}", digest, data=data, inline=True)
    return Put(f"{subfolder}/{rel}", digest)


def _result(session: Session, raw: object) -> tuple[str, int, int, int]:
    """Rank 0's outcome as posted: (revision, commits, uploaded, deleted); its error is raised."""
    if isinstance(raw, dict) and isinstance(raw.get("error"), dict):
        raise session.failure(raw["error"])
    ok = raw.get("ok") if isinstance(raw, dict) else None
    if (isinstance(ok, list) and len(ok) == 4 and isinstance(ok[0], str)
            and (SHA_RE.match(ok[0]) or BUCKET_PIN_RE.match(ok[0]))
            and all(is_whole(n) for n in ok[1:])):
        return ok[0], ok[1], ok[2], ok[3]
    session.reject(0, "result", "not a commit's SHA and counts")


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


def upload_owned(store: Store, local: LocalDir, subfolder: str, mine: list[str], branch: str,
                 label: str) -> dict[str, str | dict[str, str] | None]:
    """Upload the files this rank owns; what rank 0 needs to commit them: each path, with
    the base64 of its bytes when the store takes it inline in the commit."""
    sources = {rel: (local.add(subfolder, rel).local or str(local.paths[rel]), local.digests[rel]) for rel in mine}
    uploaded = store.upload(subfolder, sources, branch=branch, progress=label)
    shipped = {rel: base64.b64encode(_read_inline(local, rel)).decode() if uploaded[rel].inline else
               {"xet": uploaded[rel].token} if store.kind == "bucket" else None for rel in mine}
    changed = local.refresh(thorough=True)
    if changed:
        raise IntegrityError(f"{changed[0]} in {local.root} changed while it was pushed: stop writing to it"
                             " before pushing it")
    return shipped


def agree(session: Session, mine: dict[str, object]) -> None:
    """Every rank's identity gathered and compared with rank 0's, before anything is read or
    uploaded: on the first difference every rank fails, naming the rank and the parameter."""
    everyone = session.gather("agree", mine)
    assert everyone is not None
    problem = disagreement(everyone)
    if problem is not None:
        session.fail(problem)


def push_distributed(store: Store, local_dir: Path, subfolder: str, session: Session, *,
                     step: int | None = None, private: bool = True, commit_message: str | None = None,
                     branch: str = "main", source: dict[str, str] | None = None,
                     metrics: dict[str, float] | None = None) -> PushResult:
    """Called on every rank of ``session``, after :func:`agree`; every rank returns the same
    result or raises the same error. ``metrics``: rank 0's go into the manifest (it commits).

    On every rank (a process group is needed, so this example is not run here)::

        with Session(store, rank, world, name="ckpt/0", timeout=300, what="push ckpt-8") as s:
            push_distributed(RepoStore.open(settings, "org/run"), Path("out/checkpoint-8"), "checkpoint-8", s, step=8)
        # -> PushResult(handle=CheckpointHandle(repo='org/run', subfolder='checkpoint-8', revision='3f1c…', ...), ...)
    """
    rank = session.rank
    local = session.run(f"hashing {local_dir}", lambda: LocalDir(local_dir, f"push {subfolder}").hash_all())
    bound = store.settings.max_manifest_bytes  # a rank's digests are a manifest's worth at most
    raw_scans = session.gather("scan", {rel: d.to_dict() for rel, d in local.digests.items()}, limit=bound)
    assert raw_scans is not None
    scans = [_scan(session, r, raw) for r, raw in enumerate(raw_scans)]
    merged, owners, problem = assign(scans)
    if problem is not None:
        session.fail(problem)
    if not merged:
        session.fail(f"no rank holds a file of {subfolder}: nothing to push", 2)
    target = None if branch == "main" else branch
    if rank == 0:
        head = session.run("creating the repo", lambda: store.ensure(target, private))
        session.post("ready", head)
    else:
        head = session.fetch("ready", 0)
        if head is not None and not (isinstance(head, str) and (SHA_RE.match(head) or head == LIVE)):
            session.reject(0, "ready", "not a commit SHA")
    mine = sorted(rel for rel, owner in owners.items() if owner == rank)
    shipped = session.run(f"uploading {len(mine)} file(s)", lambda: upload_owned(
        store, local, subfolder, mine, branch, f"push {subfolder}: uploading (rank {rank})"))
    owned = [{rel: merged[rel] for rel, owner in owners.items() if owner == r} for r in range(session.world)]
    inline = [sum(d.size for d in files.values() if d.size <= INLINE_LIMIT) for files in owned]
    report = {"identity": store.identity(subfolder, step).to_dict(), "files": shipped}
    gathered = session.gather("upload", report, root=0, limit=bound + 2 * max(inline, default=0))
    if gathered is None:
        revision, commits, uploaded, deleted = _result(session, session.fetch("result", 0))
        handle = CheckpointHandle(store.name, subfolder, revision, step, store.settings.endpoint)
        return PushResult(handle, commits, uploaded, deleted, local_dir)  # the same commit; this rank's own dir
    session.drop("upload")  # the inline bytes: rank 0 holds them now, the store need not
    ops: dict[str, Put] = {}
    contributors: list[Identity | None] = []
    for r, part in enumerate(gathered):
        reported, files = _shipped(session, r, part, owned[r], store.kind == "bucket")
        contributors.append(reported)
        for rel, data in files.items():
            if isinstance(data, str):  # a bucket: the manifest records the Xet hash the rank uploaded
                merged[rel] = replace(merged[rel], xet=data)
            ops[rel] = _operation(subfolder, rel, merged[rel], data)
    session.claim_commit()

    def make_commit() -> PushResult:
        planned = planner(store, subfolder, lambda _have: merged, lambda _sub, rel: ops[rel], step=step,
                          source=source, commit_message=commit_message, contributors=tuple(contributors),
                          who="rank", metrics=metrics)
        outcome = store.write(planned.plan, what=f"committing {subfolder}", branch=branch, head=head,
                              max_writes=-(-len(merged) // planned.batch_size) + EXTRA_COMMITS)
        uploaded, deleted = landed_counts(outcome, subfolder)
        return finish(store, subfolder, step, outcome, outcome.writes, uploaded, deleted, local_dir)

    try:
        result = make_commit()
    except Exception as exc:
        error = session.failed_commit(exc)
        session.post("result", {"error": {"message": unrendered(error), "exit_code": error.exit_code}})
        raise error from exc
    session.post("result", {"ok": [result.handle.revision, result.commits, result.uploaded_files,
                                   result.deleted_files]})
    return result
