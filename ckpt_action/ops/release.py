"""promote: a checkpoint through a release pipeline.

promote copies a pinned checkpoint to a target folder with the Hub's server-side
copies (no LFS bytes move), in one commit that also writes the target's manifest,
recording the source SHA (which prune reads: it never deletes a promoted checkpoint's
source, :mod:`~ckpt_action.ops.prune`). Its three paths (server-side copy, into another
repo, a converted model folder) share the tag check and the source record; which files a
model folder keeps lives apart, in ``asmodel``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, expected_from_remote
from ckpt_action.checkpoint.provenance import PROVENANCE_NAME, Provenance
from ckpt_action.checkpoint.sealing import WRITTEN, Sealed, model_name, seal, with_provenance
from ckpt_action.checkpoint.signing import SIGNATURE_NAME, LoadedSigner, SignatureError
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import confirmed
from ckpt_action.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    UnreadableManifest,
    param,
)
from ckpt_action.handle import CheckpointHandle
from ckpt_action.ops import asmodel
from ckpt_action.ops.card import Row, card_operation
from ckpt_action.ops.prune import tagged_folders
from ckpt_action.ops.pull import Selection, pull
from ckpt_action.ops.push import push
from ckpt_action.stores.base import Store, open_complete
from ckpt_action.stores.writes import Copy, Delete, Final, Put, Write

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromoteResult:
    handle: CheckpointHandle
    """The target: repo, target folder, and the commit that holds it."""
    source: CheckpointHandle
    commits: int
    tag: str | None = None
    branch: str | None = None
    signer: str | None = None
    """Who signed the target's ``model.sig`` (None: promoted unsigned)."""
    chosen_by: tuple[str, float] | None = None
    """With ``best``: the metric that chose the source, and its value there."""
    left_out: tuple[str, ...] = ()
    """With ``as_model``: the source's files the release does not hold."""
    converted: str | None = None
    """With ``as_model``: what was converted to safetensors (``dcp``, ``bin``), None: nothing."""


def _same_promotion(have: Manifest, wanted: Manifest) -> bool:
    """The target already holds this checkpoint from this source folder.

    The source SHA is left out: re-running a promote of the head reads the checkpoint at
    a newer SHA (the previous promote's commit) with the very same bytes.
    """
    def key(m: Manifest) -> tuple[object, ...]:
        src = m.source or {}
        return (*replace(m, source=None).content_key(), src.get("repo"), src.get("subfolder"))

    return key(have) == key(wanted)


def promote(remote: Store, subfolder: str, revision: str | None, to: str, *, tag: str | None = None,
            branch: str | None = None, target: Store | None = None,
            signer: LoadedSigner | None = None, card: bool = False, as_model: bool = False,
            max_shard_size: int = asmodel.DEFAULT_MAX_SHARD_SIZE, strip_prefix: str | None = None) -> PromoteResult:
    """Copy ``subfolder`` at ``revision`` to ``to`` (in the same repo, or in ``target``).

    With ``as_model`` the target is a folder ``from_pretrained`` loads (:mod:`~ckpt_action.ops.asmodel`):
    only the model's files are kept (copied server-side in the same repo), and weights that
    are not safetensors (a DCP checkpoint, ``.bin`` pickles) are converted, sharded at
    ``max_shard_size`` bytes, with ``strip_prefix`` taken off their names.

    The source's ``model.sig`` and provenance statement are never copied: they vouch for the
    source folder. With ``signer`` the target gets its own, in the same commit as its manifest
    (the statement names the target and the source it was promoted from). With ``card`` the
    same commit updates the model card's table of checkpoints (:mod:`~ckpt_action.ops.card`).

    >>> from ckpt_action.stores import RepoStore
    >>> res = promote(RepoStore.open(settings, "org/run"), "checkpoint-300", None, "release", tag="v1.0")
    >>> res.handle.subfolder, res.handle.step, len(res.handle.revision)
    ('release', 300, 40)
    """
    same_repo = target is None or target.name == remote.name
    if same_repo and (to == subfolder or to.startswith(subfolder + "/") or subfolder.startswith(to + "/")):
        raise InputError(f"{param('to')} {to} overlaps the checkpoint {subfolder}: name a folder outside"
                         " it", param='to')
    snap, source = open_complete(remote, subfolder, remote.resolve(revision), "promote")
    sha, step = source.revision, source.step
    selection = None
    if as_model:
        selection = asmodel.select([rel for rel in snap.files if rel not in (*WRITTEN, MANIFEST_NAME)])
        if strip_prefix and selection.kind == "safetensors":
            raise InputError(f"{param('strip_prefix')}: this checkpoint's weights are safetensors already, kept as"
                             " saved: drop it", param="strip_prefix")
        if selection.kind != "safetensors" or not same_repo:
            return _promote_model(remote, source, target if target is not None else remote, to, selection,
                                  tag=tag, branch=branch, signer=signer, card=card,
                                  metrics=snap.manifest.metrics if snap.manifest else None,
                                  max_shard_size=max_shard_size, strip_prefix=strip_prefix)
    if target is not None and not same_repo:
        return _promote_across(remote, source, target, to, tag=tag, signer=signer, card=card,
                               metrics=snap.manifest.metrics if snap.manifest else None)

    digests = dict(snap.manifest.files) if snap.manifest else expected_from_remote(snap.files)
    digests = {rel: d for rel, d in digests.items() if rel not in WRITTEN}
    if selection is not None:  # only the model's files, copied server-side as any promote copies
        digests = {rel: d for rel, d in digests.items() if rel in selection.keep}
    wanted = Manifest(files=digests, step=step, complete=True,
                      source={"repo": remote.name, "subfolder": subfolder, "revision": sha},
                      metrics=snap.manifest.metrics if snap.manifest else None)
    sealed = None
    if signer is not None:  # signed once, before any write: the target's content does not depend on its head
        wanted, sealed = _signed_promotion(remote, snap, signer, to, wanted)
    on = branch or "main"
    if tag is not None:
        tagged = remote.refs()[1].get(tag)
        if tagged is not None:
            at_tag = remote.snapshot(tagged, to)
            if at_tag.manifest is None or not _same_promotion(at_tag.manifest, wanted) or at_tag.problems():
                raise ConflictError(f"tag {tag} already points at {tagged[:12]}, which does not hold this promotion:"
                                    f" choose another {param('tag')}")
            return PromoteResult(CheckpointHandle(remote.name, to, tagged, step, remote.settings.endpoint), source, 0,
                                 tag, branch, left_out=_left_out(selection))
    if branch is not None:
        if branch not in remote.refs()[0]:
            remote.create_branch(branch, sha)
    identity = remote.identity(to, step)

    title = f"Promote {subfolder} @ {sha[:12]} to {to}"

    def plan(head: str | None) -> Write | None:
        assert head is not None
        have = remote.snapshot(head, to)
        keep = set(wanted.files) | ({SIGNATURE_NAME} if sealed else set())
        stale = [rel for rel in have.files if rel not in keep]
        copies = [rel for rel in digests if not confirmed(digests[rel], have.files.get(rel))]
        if (not stale and not copies and have.manifest is not None and _same_promotion(have.manifest, wanted)
                and (sealed is None or SIGNATURE_NAME in have.files)):
            return None
        ops: list[Put | Delete | Copy] = [Delete(f"{to}/{rel}") for rel in stale]
        ops += [Copy(f"{subfolder}/{rel}", f"{to}/{rel}", sha, snap.files[rel]) for rel in copies]
        if sealed is None:
            ops.append(Put(f"{to}/{MANIFEST_NAME}", data=wanted.to_json()))
        else:
            ops += [Put(f"{to}/{PROVENANCE_NAME}", data=sealed.provenance),
                    Put(f"{to}/{MANIFEST_NAME}", data=sealed.manifest),
                    Put(f"{to}/{SIGNATURE_NAME}", data=sealed.signature)]
        if card:
            row = Row(to, step, None, wanted.metrics, True, sealed is not None)
            table = card_operation(remote, head, add=[row], tag=(tag, [to, subfolder]) if tag else None,
                                   tags_of=tagged_folders)
            ops += [table] if table is not None else []
        return Write(ops, title, finalizes=Final(identity, (identity,), have.files))

    outcome = remote.write(plan, what=f"promoting {subfolder}", branch=on)
    result_sha = outcome.pin
    assert result_sha is not None
    if tag is not None:
        remote.create_tag(tag, result_sha, f"{to} from {subfolder} @ {sha}")
    return PromoteResult(CheckpointHandle(remote.name, to, result_sha, step, remote.settings.endpoint), source,
                         outcome.writes, tag, branch, sealed.signer if sealed else None, left_out=_left_out(selection))


def _left_out(selection: asmodel.ModelSelection | None) -> tuple[str, ...]:
    return tuple(selection.left_out_names()) if selection is not None else ()


def _promote_model(remote: Store, source: CheckpointHandle, target: Store, to: str,
                   selection: asmodel.ModelSelection, *, tag: str | None, branch: str | None,
                   signer: LoadedSigner | None, card: bool, metrics: dict[str, float] | None,
                   max_shard_size: int, strip_prefix: str | None) -> PromoteResult:
    """A release folder that needs this machine: weights to convert, or another repo.

    The model's files (and the weights to convert) are downloaded, each verified against
    the source's manifest before anything reads it; the converted folder is pushed in one
    commit whose manifest records the source (repo, folder, SHA), its step and metrics."""
    same = target.name == remote.name
    if tag is not None and (tagged := _target_tags(target).get(tag)) is not None:
        at_tag = target.snapshot(tagged, to)
        src = (at_tag.manifest.source or {}) if at_tag.manifest else {}
        if (src.get("revision"), src.get("subfolder")) != (source.revision, source.subfolder):
            raise ConflictError(f"tag {tag} already exists in {target.name} at {tagged[:12]}: choose another"
                                f" {param('tag')}")
        return PromoteResult(CheckpointHandle(target.name, to, tagged, source.step, target.settings.endpoint),
                             source, 0, tag, branch, left_out=_left_out(selection),
                             converted=None if selection.kind == "safetensors" else selection.kind)
    if selection.kind != "safetensors":
        asmodel.needs_torch()
    if same and branch is not None and branch not in remote.refs()[0]:
        remote.create_branch(branch, source.revision)
    staging = Path(tempfile.mkdtemp(prefix="ckpt-promote-"))
    try:
        # Literal names: a file name holding a glob character matches itself and what else it
        # matches is in the selection too, or is left out by the pull's own listing check.
        wanted = Selection(include=(*selection.keep, *selection.convert))
        pulled = pull(remote, source.subfolder, None, staging / "ckpt", sha=source.revision, select=wanted)
        out = staging / "model"
        asmodel.build(selection, pulled.local_dir, out, max_shard_size=max_shard_size, strip_prefix=strip_prefix)
        shutil.rmtree(pulled.local_dir, ignore_errors=True)  # the disk holds the release, not both
        what = "Convert" if selection.kind != "safetensors" else "Promote"
        res = push(target, out, to, step=source.step, private=True, branch=(branch or "main") if same else "main",
                   commit_message=f"{what} {remote.name}/{source.subfolder} @ {source.revision[:12]} to a model"
                                  f" folder {to}",
                   source={"repo": remote.name, "subfolder": source.subfolder, "revision": source.revision},
                   signer=signer, promoted_from=f"{remote.name}/{source.subfolder}@{source.revision}",
                   metrics=metrics, card=card, card_tags=tagged_folders if card else None, card_tag=tag)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if tag is not None:
        target.create_tag(tag, res.handle.revision)
    return PromoteResult(res.handle, source, res.commits, tag, branch if same else None, signer=res.signer,
                         left_out=_left_out(selection),
                         converted=None if selection.kind == "safetensors" else selection.kind)


def _source_commit(remote: Store, snap: Snapshot) -> str | None:
    """The training code's commit the source's statement names, carried to the target's
    (the promote's own GITHUB_SHA is the release workflow's commit, not the training's)."""
    if PROVENANCE_NAME not in snap.files:
        return None
    try:
        data = remote.read_small_file(snap.revision, f"{snap.subfolder}/{PROVENANCE_NAME}", missing_ok=True)
        return Provenance.from_json(data).source_commit if data else None
    except (SignatureError, UnreadableManifest):
        return None


def _signed_promotion(remote: Store, snap: Snapshot, signer: LoadedSigner, to: str,
                      wanted: Manifest) -> tuple[Manifest, Sealed]:
    """The target's manifest with its own provenance statement listed, signed."""
    statement = Provenance.here(remote.name, to, wanted.step, os.environ,
                                promoted_from=f"{remote.name}/{snap.subfolder}@{snap.revision}",
                                source_commit=_source_commit(remote, snap))
    files, data = with_provenance(wanted.files, statement)
    wanted = replace(wanted, files=files)
    return wanted, seal(signer, wanted, data, model_name(remote.name, to))


def _target_tags(target: Store) -> dict[str, str]:
    """The target repo's tags; none where it does not exist yet (the push creates it, private)."""
    try:
        return target.refs()[1]
    except NotFoundError:
        return {}


def _promote_across(remote: Store, source: CheckpointHandle, target: Store, to: str, *,
                    tag: str | None, signer: LoadedSigner | None = None, card: bool = False,
                    metrics: dict[str, float] | None = None) -> PromoteResult:
    """Into another repo: the bytes pass through this machine, verified on the way down;
    the target's manifest carries the source's ``metrics``.
    With ``card`` the commit that writes the target also updates the target repo's model
    card, its row naming ``tag`` (made on that commit right after)."""
    if tag is not None and (tagged := _target_tags(target).get(tag)) is not None:
        at_tag = target.snapshot(tagged, to)
        if at_tag.manifest is None or (at_tag.manifest.source or {}).get("revision") != source.revision:
            raise ConflictError(f"tag {tag} already exists in {target.name} at {tagged[:12]}: choose another"
                                f" {param('tag')}")
        return PromoteResult(CheckpointHandle(target.name, to, tagged, source.step, target.settings.endpoint),
                             source, 0, tag)
    staging = Path(tempfile.mkdtemp(prefix="ckpt-promote-"))
    try:
        pulled = pull(remote, source.subfolder, None, staging / "ckpt", sha=source.revision)
        res = push(target, pulled.local_dir, to, step=source.step, private=True,
                   commit_message=f"Promote {remote.name}/{source.subfolder} @ {source.revision[:12]}",
                   source={"repo": remote.name, "subfolder": source.subfolder, "revision": source.revision},
                   signer=signer, promoted_from=f"{remote.name}/{source.subfolder}@{source.revision}",
                   metrics=metrics, card=card, card_tags=tagged_folders if card else None, card_tag=tag)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if tag is not None:
        target.create_tag(tag, res.handle.revision)
    return PromoteResult(res.handle, source, res.commits, tag, signer=res.signer)
