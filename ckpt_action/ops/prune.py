"""What prune and list answer, and prune's order of steps: read the storage figure and the
history first (a history too long to read is refused before anything is written), then the
prune's one commit, then the freeing of what only the pruned folders held."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckpt_action.errors import NotFoundError

if TYPE_CHECKING:
    from ckpt_action.checkpoint.metrics import Objective
    from ckpt_action.ops.discover import CheckpointInfo
    from ckpt_action.stores.base import Store


@dataclass(frozen=True)
class PruneResult:
    """What :func:`~ckpt_action.api.prune` deleted (or, with ``dry_run``, would delete) and why the rest stays."""

    revision: str | None
    """The commit holding the pruned repo (the head read, for a dry run or nothing to delete)."""
    deleted: list[str]
    kept: dict[str, str] = field(default_factory=dict)
    """Each kept ``checkpoint-N`` with why it is kept."""
    dry_run: bool = False
    repo: str = ""
    free_storage: bool = False
    freed_bytes: int | None = None
    """With ``free_storage``: bytes the Hub freed (its usage before minus after, where it
    reports usage), or, for a dry run, the bytes of the objects that would be deleted."""
    freed_objects: int | None = None
    """With ``free_storage``: LFS objects deleted (or that would be)."""
    used_storage_before: int | None = None
    used_storage_after: int | None = None


@dataclass(frozen=True)
class ListResult:
    """What a listing read: every checkpoint of ``repo`` at one SHA, newest step first."""

    repo: str
    revision: str | None
    """The SHA read; None when the repo does not exist (or this token cannot see it)."""
    checkpoints: list[CheckpointInfo]
    tags: dict[str, list[str]] | None = None
    """With ``tags`` asked of the listing: each folder with the tags made for it (prune's rule)."""


def missing_repo(repo: str, what: str = "checkpoint") -> str:
    """The warning for a repo that does not exist, or that this token cannot see."""
    return f"{repo} does not exist, or this token cannot see it: no {what}"


def list_repo(remote: Store, revision: str | None, warn: Callable[[str], None]) -> ListResult:
    """Every checkpoint at one SHA; a repo that does not exist has none (``warn`` says so)."""
    from ckpt_action.ops.discover import list_checkpoints

    try:
        remote.resolve(revision)
    except NotFoundError:
        if revision is not None:
            raise
        warn(missing_repo(remote.name, "checkpoints"))
        return ListResult(remote.name, None, [])
    sha, infos = list_checkpoints(remote, revision)
    return ListResult(remote.name, sha, infos)


def prune(remote: Store, keep: int | None, *, dry_run: bool, free_storage: bool, keep_every: int | None = None,
          keep_best: Objective | None = None, card: bool = False) -> PruneResult:
    """The prune in one commit and, with ``free_storage``, the freeing after it. ``keep``
    (the newest to keep), ``keep_every`` and ``keep_best`` keep the union of what each keeps;
    ``card``: the prune's commit updates the model card's table too."""
    from ckpt_action.ops.release import prune as prune_commit

    rules: dict[str, Any] = {"keep_every": keep_every, "keep_best": keep_best, "card": card}
    if remote.kind == "bucket":  # a bucket's deletes free its storage at once: its usage before and after
        before = remote.usage()
        plan, _pin = prune_commit(remote, keep, dry_run=dry_run, **rules)
        after = before if dry_run else remote.usage()
        return PruneResult(None, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                           remote.name, True, before - after if before is not None and after is not None else None,
                           None, before, after)
    if not free_storage:
        plan, sha = prune_commit(remote, keep, dry_run=dry_run, **rules)
        return PruneResult(sha, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                           remote.name)
    from ckpt_action.ops.freeing import free_pruned, read_references, used_storage

    # Read before the prune's commit: the Hub's figure (that commit itself frees nothing), and
    # the history, so a repo too long to read is refused before anything is written.
    before = used_storage(remote)
    history = read_references(remote)
    plan, sha = prune_commit(remote, keep, dry_run=dry_run, **rules)
    freed = free_pruned(remote, plan.delete, history, head=sha, used_before=before, dry_run=dry_run)
    return PruneResult(sha, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                       remote.name, True, freed.freed_bytes, freed.objects, freed.used_before, freed.used_after)
