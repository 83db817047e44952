"""prune, whole: what it keeps and why (:func:`plan_prune`, over the one verdict and the
rules of :mod:`~ckpt_action.ops.retention`), its one commit (:func:`prune_commit`), and its
order of steps (:func:`prune`): read the storage figure and the history first (a history
too long to read is refused before anything is written), then the prune's one commit, then
the freeing of what only the pruned folders held (:mod:`~ckpt_action.ops.freeing`). Also
what list answers, and the tagged-folders rule (which checkpoint a tag was made for) that
promote's card reads too.

prune deletes old ``checkpoint-N`` folders in one commit, never the latest complete one,
never a promoted checkpoint's source, never one a tag points at.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest
from ckpt_action.errors import InputError, IntegrityError, NotFoundError, UnreadableManifest, param
from ckpt_action.handle import step_of
from ckpt_action.ops.card import card_operation
from ckpt_action.ops.discover import judge_candidates
from ckpt_action.ops.retention import keep_reasons, ranked
from ckpt_action.stores.writes import Copy, Delete, Put, Write

if TYPE_CHECKING:
    from ckpt_action.checkpoint.metrics import Objective
    from ckpt_action.ops.discover import CheckpointInfo
    from ckpt_action.stores.base import Store

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class PrunePlan:
    revision: str
    delete: list[str]
    keep: list[str]
    reasons: dict[str, str] = field(default_factory=dict)
    """Why each kept checkpoint is kept."""


def plan_prune(remote: Store, keep_last: int | None, head: str | None = None, *,
               keep_every: int | None = None, keep_best: Objective | None = None) -> PrunePlan:
    """What prune would delete at ``head`` (default: main's current head), and why everything else stays.

    Only top-level ``checkpoint-N`` folders are candidates; ``sft/``, promoted targets and
    any other folder are never touched. The rules count only complete checkpoints (the one
    verdict, :func:`~ckpt_action.ops.discover.judge_candidates`): a folder that fails it is
    never kept as the last, an N-th or the best, so it never costs a complete one its place;
    it is kept while it is newer than the latest complete checkpoint (a push may still be
    finishing it) and deleted once a complete one is newer. A candidate whose manifest
    cannot be read is kept with that reason: it may be anything, and deleting it would hide
    the question.
    ``keep_last``, ``keep_every`` and ``keep_best`` keep the union of what each keeps
    (:func:`~ckpt_action.ops.retention.keep_reasons`); ``keep_best`` on a metric no
    checkpoint here has is an InputError, raised before anything is deleted.
    """
    for name, value in (("keep_last", keep_last), ("keep_every", keep_every)):
        if value is not None and value < 1:
            raise InputError(f"{param(name)} must be at least 1", param=name)
    if keep_last is None and keep_every is None and keep_best is None:
        raise InputError(f"prune needs {param('keep_last')}, {param('keep_every')} or {param('keep_best')}: what"
                         " to keep", param="keep_last")
    head = head or remote.resolve(None)
    if head is None:
        return PrunePlan("", [], [])

    folders = remote.folders(head)
    ckpts = sorted((s, name) for name in folders if (s := step_of(name)) is not None)
    reasons: dict[str, str] = {}
    # The one verdict on every candidate first: the rules count complete checkpoints only.
    judged = {name: cand for name, (cand, _chosen) in judge_candidates(remote, head, folders).items()}
    complete = [c for c in judged.values() if c.incomplete is None]
    if keep_best is not None and not ranked(complete, keep_best):
        raise InputError(f"{param('keep_best')} {keep_best}: no complete checkpoint-N here records {keep_best.metric}:"
                         " name a metric they have (see list), or drop it; nothing was deleted",
                         param="keep_best")
    for name, whys in keep_reasons(complete, keep_last=keep_last, keep_every=keep_every,
                                   keep_best=keep_best).items():
        reasons[name] = "; ".join(whys)
    newest = max(complete, key=lambda c: c.step, default=None)
    if newest is not None:
        reasons.setdefault(newest.name, "the latest complete checkpoint")
    # Promoted targets name their source in the manifest; the source stays.
    for name in sorted(_promoted_sources(remote, head, list(folders))):
        if name in folders:
            reasons.setdefault(name, "source of a promoted folder")
    # A tag protects the checkpoint it was made for: the source of a promoted folder at the
    # tagged commit, else the highest checkpoint-N there (the push-then-tag pattern).
    for tag, tagged in remote.refs()[1].items():
        for name in _tagged_checkpoints(remote, tagged):
            if name in folders:
                reasons.setdefault(name, f"tagged {tag}")
    for name, cand in judged.items():
        if name in reasons or cand.incomplete is None:
            continue
        if cand.unreadable is not None:
            reasons[name] = f"{cand.unreadable}; not deleted: delete it by hand if it is garbage"
        elif newest is None or cand.step > newest.step:
            # Newer than every complete checkpoint: a push may still be finishing it.
            reasons[name] = f"not complete ({cand.incomplete}), but newer than the latest complete checkpoint"
    delete = [name for _s, name in ckpts if name not in reasons]
    keep = [name for _s, name in ckpts if name in reasons]
    return PrunePlan(head, delete, keep, reasons)


def _promotions(remote: Store, sha: str, folders: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Each promoted folder at sha (a top-level folder outside the ``checkpoint-N`` ones
    holding a manifest at any depth: a promote target may be ``release/v1``) with the
    ``source`` its manifest names (empty when it names none)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name in folders:
        if step_of(name) is not None:
            continue
        try:
            manifests = [rel for rel in remote.files(sha, name) if posixpath.basename(rel) == MANIFEST_NAME]
        except IntegrityError as exc:
            log.warning("%s/ cannot be listed (%s): a checkpoint promoted into it is not protected", name, exc)
            continue
        for rel in manifests:
            folder = posixpath.join(name, posixpath.dirname(rel)).rstrip("/")
            try:
                data = remote.read_small_file(sha, f"{name}/{rel}")
                assert data is not None
                manifest = Manifest.from_json(data)
            except UnreadableManifest as exc:
                log.warning("%s/: %s: the checkpoint it was promoted from, if any, is not protected", folder, exc)
                continue
            out.append((name, dict(manifest.source or {})))
    return out


def _sources(remote: Store, promotions: list[tuple[str, dict[str, Any]]]) -> set[str]:
    return {src["subfolder"] for _, src in promotions if src.get("repo") == remote.name and src.get("subfolder")}


def _promoted_sources(remote: Store, sha: str, folders: list[str]) -> set[str]:
    """Checkpoint folders that promoted folders at sha were copied from: the ``source`` of
    every manifest outside the top-level ``checkpoint-N`` folders."""
    return _sources(remote, _promotions(remote, sha, folders))


def _tagged_checkpoints(remote: Store, sha: str) -> set[str]:
    """The checkpoint a tag at ``sha`` was made for: the sources of promoted folders there,
    else the highest checkpoint-N."""
    names = list(remote.folders(sha))
    sources = _promoted_sources(remote, sha, names)
    if sources:
        return sources
    steps = [(s, n) for n in names if (s := step_of(n)) is not None]
    return {max(steps)[1]} if steps else set()


def tagged_folders(remote: Store, folders: list[str]) -> dict[str, list[str]]:
    """Each of ``folders`` with the tags made for it: the checkpoint (prune's rule,
    :func:`_tagged_checkpoints`) and the promoted folders at the tag."""
    out: dict[str, list[str]] = {}
    for tag, tagged in sorted(remote.refs()[1].items()):
        names = list(remote.folders(tagged))
        promotions = _promotions(remote, tagged, names)
        made_for = _sources(remote, promotions)
        if not made_for:
            steps = [(s, n) for n in names if (s := step_of(n)) is not None]
            made_for = {max(steps)[1]} if steps else set()
        # The card names the folders a promote wrote too (a release row keeps its tag), which
        # prune's rule does not need: prune never deletes a folder outside checkpoint-N.
        for name in sorted(made_for | {name for name, src in promotions if src}):
            if name in folders:
                out.setdefault(name, []).append(tag)
    return out


def prune_commit(remote: Store, keep_last: int | None, *, dry_run: bool = False, keep_every: int | None = None,
                 keep_best: Objective | None = None, card: bool = False) -> tuple[PrunePlan, str | None]:
    """Delete what :func:`plan_prune` says, in one commit pinned to the head it planned at.

    If the branch moves first, the prune is planned again at the new head. The plan
    returned names what the commit(s) that landed deleted, and what the last plan keeps.
    With ``card`` the same commit updates the model card's table of checkpoints (also when
    nothing is deleted and the table is not what the repo holds).
    """
    first = plan_prune(remote, keep_last, keep_every=keep_every, keep_best=keep_best)
    if dry_run or not first.revision or (not first.delete and not card):
        return first, first.revision or None
    planned = {first.revision: first}
    last = first

    def plan(head: str | None) -> Write | None:
        nonlocal last
        # The first round uses the plan made above; later ones plan at the head they read
        # (a moved head makes the commit a 412, and the round after plans again).
        last = planned.pop(head) if head in planned else plan_prune(remote, keep_last, head,
                                                                                    keep_every=keep_every,
                                                                                    keep_best=keep_best)
        ops: list[Put | Delete | Copy] = [Delete(f"{name}/") for name in last.delete]
        table = card_operation(remote, head, drop=last.delete, tags_of=tagged_folders) if card else None
        if table is not None:
            ops.append(table)
        if not ops:
            return None
        title = (f"Prune {len(last.delete)} checkpoint(s), keep {', '.join(last.keep)}"[:200] if last.delete
                 else "Update the table of checkpoints in README.md")
        return Write(ops, title)

    outcome = remote.write(plan, what="pruning", head=first.revision)
    deleted = [op.path.rstrip("/") for p in outcome.landed for op in p.operations if isinstance(op, Delete)]
    return PrunePlan(last.revision, deleted, last.keep, last.reasons), outcome.pin
