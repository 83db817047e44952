"""push: make ``repo/<subfolder>/`` exactly equal to a local dir, manifest last.

The push is a convergence loop rather than a single upload: read the head, work out
what differs, commit the next batch with ``parent_commit`` set to that head, repeat.
Because every commit names its parent, a retry after an ambiguous failure (a 500
after the commit landed, a dropped connection) can never make a second commit or mix
two pushes: the Hub answers 412, and the next round re-reads what actually landed.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import CkptError, IntegrityError, NotFoundError, RemoteError
from .handle import CheckpointHandle
from .hubclient import backoff, call, is_transient
from .manifest import MANIFEST_NAME, FileDigest, Manifest, digest_files, matches_remote, scan_dir
from .progress import Ticker, bytes_read_since_now
from .remote import RemoteRepo, Snapshot
from .settings import Settings

log = logging.getLogger(__name__)
# Rounds of the loop beyond the batches themselves: conflicts (412) and ambiguous
# failures each cost one round. Concurrent pushers to one repo conflict often.
_EXTRA_ROUNDS = 40


@dataclass(frozen=True)
class PushResult:
    handle: CheckpointHandle
    commits: int
    """Commits this push made (0 for a no-op re-push)."""
    uploaded_files: int
    deleted_files: int


def _ops_for(paths: dict[str, Path], digests: dict[str, FileDigest], subfolder: str) -> dict[str, object]:
    from huggingface_hub import CommitOperationAdd

    ops: dict[str, object] = {}
    for rel, full in paths.items():
        op = CommitOperationAdd(path_in_repo=f"{subfolder}/{rel}", path_or_fileobj=str(full))
        sha = digests[rel].sha256
        assert sha is not None
        op.upload_info.sha256 = bytes.fromhex(sha)  # hashed once already; the client would re-read
        ops[rel] = op
    return ops


def push(
    settings: Settings,
    repo: str,
    local_dir: Path,
    subfolder: str,
    *,
    step: int | None = None,
    private: bool = True,
    commit_message: str | None = None,
    branch: str = "main",
    source: dict[str, str] | None = None,
) -> PushResult:
    """Push ``local_dir`` to ``repo/subfolder`` and return the SHA holding it complete.

    >>> from ckpt_action.settings import Settings
    >>> s = Settings("http://127.0.0.1:8000")
    >>> push(s, "org/run", Path("out/checkpoint-300"), "checkpoint-300", step=300)  # doctest: +SKIP
    PushResult(handle=CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', ...), ...)
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete
    from huggingface_hub.errors import HfHubHTTPError

    paths = scan_dir(local_dir)
    sizes = {rel: full.stat().st_size for rel, full in paths.items()}
    with Ticker(f"push {subfolder}: hashing", sum(sizes.values()), bytes_read_since_now()):
        digests = digest_files(paths)
    adds = _ops_for(paths, digests, subfolder)
    complete = Manifest(files=digests, step=step, complete=True, source=source)
    partial = Manifest(files=digests, step=step, complete=False, created_at="", source=source)
    title = commit_message or f"Push {subfolder}" + (f" (step {step})" if step is not None else "")

    remote = RemoteRepo(settings, repo)
    api = remote.api
    target = None if branch == "main" else branch
    try:
        known_head = remote.resolve(target)
    except NotFoundError:
        # Only a missing repo gets created, so an existing one keeps its visibility.
        call(settings, "creating the repo", api.create_repo, repo, private=private, exist_ok=True, repo=repo)
        known_head = remote.resolve(target)
    batch_size = settings.max_files_per_commit - 1  # room for the manifest
    max_rounds = -(-len(adds) // batch_size) + _EXTRA_ROUNDS
    commits = uploaded = deleted = failures = 0

    for _round in range(max_rounds):
        head = known_head if known_head is not None else remote.resolve(target)
        known_head = None
        state = _state(remote, head, subfolder)
        have = state.files if state else {}
        pending = [rel for rel in adds if not matches_remote(digests[rel], have.get(rel))]
        stale = sorted(rel for rel in have if rel not in digests)
        current = state.manifest if state else None
        if not pending and not stale and current is not None and current.content_key() == complete.content_key():
            assert head is not None
            return PushResult(CheckpointHandle(repo, subfolder, head, step, settings.endpoint),
                              commits, uploaded, deleted)

        final = len(pending) <= batch_size
        batch = pending[:batch_size]
        marker = complete if final else partial
        ops: list[object] = [CommitOperationDelete(f"{subfolder}/{rel}") for rel in stale]
        for rel in batch:
            if getattr(adds[rel], "_is_committed", False):  # landed once, then overwritten by another push
                adds[rel] = _ops_for({rel: paths[rel]}, digests, subfolder)[rel]
            ops.append(adds[rel])
        ops.append(CommitOperationAdd(f"{subfolder}/{MANIFEST_NAME}", marker.to_json()))
        part = "" if final and commits == 0 else f" (part {commits + 1})"
        try:
            with Ticker(f"push {subfolder}: uploading", sum(sizes[rel] for rel in batch), bytes_read_since_now()):
                info = api.create_commit(
                    repo,
                    operations=ops,  # type: ignore[arg-type]
                    commit_message=title + part,
                    commit_description="Written by ckpt-action; the manifest is committed with the last part.",
                    parent_commit=head,
                    revision=branch,
                )
        except HfHubHTTPError as exc:
            status = getattr(exc.response, "status_code", None)
            if status == 412:
                # Someone committed since we read the head: re-read and re-diff.
                time.sleep(random.uniform(0.05, 0.3) * min(1 + _round, 10))  # noqa: S311
                continue
            if not is_transient(exc):
                raise remote.error(exc, f"committing {subfolder}") from exc
            failures = _ambiguous(settings, remote, exc, failures, subfolder)
            continue
        except CkptError:
            raise
        except Exception as exc:
            if not is_transient(exc):
                raise remote.error(exc, f"committing {subfolder}") from exc
            failures = _ambiguous(settings, remote, exc, failures, subfolder)
            continue
        commits += 1
        uploaded += len(batch)
        deleted += len(stale)
        if final:
            return PushResult(CheckpointHandle(repo, subfolder, str(info.oid), step, settings.endpoint),
                              commits, uploaded, deleted)
    raise RemoteError(
        f"pushing {subfolder}: the branch kept moving or failing after {max_rounds} rounds: try again later"
    )


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


def _ambiguous(settings: Settings, remote: RemoteRepo, exc: BaseException, failures: int, subfolder: str) -> int:
    """After a commit failed in a way that may have landed: wait, then let the loop re-read."""
    if failures >= settings.retries:
        raise remote.error(exc, f"committing {subfolder}") from exc
    log.warning("commit of %s failed (%s); checking what landed before retrying", subfolder, type(exc).__name__)
    time.sleep(backoff(settings, failures))
    return failures + 1
