"""latest and list: what checkpoints a repo holds, read at one pinned SHA."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, RemoteFile
from ckpt_action.checkpoint.metrics import Objective
from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import UNFINISHED, no_manifest_problem, tree_matches
from ckpt_action.errors import IntegrityError, NotFoundError, UnreadableManifest
from ckpt_action.handle import CheckpointHandle, step_of
from ckpt_action.ops.retention import Candidate, ranked
from ckpt_action.stores.base import Store, manifests_here

if TYPE_CHECKING:
    from ckpt_action.checkpoint.verifying import Verifier
    from ckpt_action.ops.signatures import SignatureCheck


@dataclass(frozen=True)
class Chosen:
    """What latest read of the folder it chose, at its SHA: a pull of that folder
    (``pull --latest``, ``resume_from_hub``) takes it instead of reading it again."""

    revision: str
    subfolder: str
    manifest_bytes: bytes | None
    """The folder's manifest as read (None: it has none)."""
    snapshot: Snapshot | None = None
    """The folder's listing and manifest, when latest listed it (no tree-id shortcut, or to verify)."""
    signature: SignatureCheck | None = None
    """The signature check latest made of ``snapshot``, with ``verifier``."""
    verifier: Verifier | None = None


@dataclass(frozen=True)
class LatestResult:
    """The highest complete ``checkpoint-N`` at ``revision``, or none (``handle`` is None)."""

    handle: CheckpointHandle | None
    revision: str | None
    skipped: list[tuple[str, str]]
    """Higher checkpoints passed over, with why (incomplete push, files disagree, an
    unreadable manifest or listing)."""
    has_manifest: bool = False
    repo_missing: bool = False
    """The Hub said 404 for the repo: it does not exist, or the token cannot see it."""
    chosen: Chosen | None = field(default=None, repr=False, compare=False)
    """What was read of the chosen folder, for the pull that follows (None when none was chosen)."""
    chosen_by: tuple[str, float] | None = None
    """With ``best``: the metric that chose the checkpoint, and its value there."""

    def missing_warning(self, repo: str, *, token: bool, require: str) -> str | None:
        """The warning for a repo the Hub says is not there (None when it is), with the
        consequence (a resume job starts from scratch) and ``require``, how to make that an
        error: a reference (``errors.param_on("require")``) each door spells as its users
        know it (``--require``, ``require: true``, ``require=True``).

        The Hub answers 404 alike for a repo that does not exist and for a private one the
        token cannot see, so both causes are named.
        """
        missing = self.missing_reason(repo, token=token)
        if missing is None:
            return None
        return f"{missing}: no checkpoint, so a resume job will start over from scratch; pass {require} where a" \
               " first run is not expected"

    def missing_reason(self, repo: str, *, token: bool) -> str | None:
        """Why there is no checkpoint when the Hub says the repo is not there (None when it
        is): for the error where none is an error (``require``, ``pull --latest``)."""
        if not self.repo_missing:
            return None
        kind = "bucket" if repo.startswith("hf://buckets/") else "repo"
        why = f"no token is set, so a private {kind} looks missing" if not token else "or this token cannot see it"
        return f"{repo} does not exist ({why})"


def latest(store: Store, revision: str | None = None, verifier: Verifier | None = None) -> LatestResult:
    """Find the highest complete ``checkpoint-N`` folder at the head of ``revision``.

    Lists only the top level (a repo's default branch by name: the manifest read then names
    the commit, which pins the answer; a named revision is resolved first), then checks candidates from the
    highest down: one with a manifest must match it; one without (written by Trainer or
    ``hf upload``) is taken as it is only where no candidate has a manifest
    (:func:`~ckpt_action.checkpoint.verdict.no_manifest_problem`); one whose manifest or listing cannot be read is
    passed over with why, so one bad folder never hides the others. A missing repo or
    branch is "none"; any other failure raises, because "could not tell" must never look
    like "start from scratch". With ``verifier``, a complete folder whose signature does not
    verify (unsigned, another signer, files that differ from what was signed) is passed over
    too, so a deploy job resumes only from a signed checkpoint.

    >>> from ckpt_action.stores import RepoStore
    >>> latest(RepoStore.open(settings, "org/run")).handle.subfolder
    'checkpoint-300'
    """
    head = _head(store, revision)
    if isinstance(head, LatestResult):
        return head
    sha, folders = head
    candidates = sorted(((s, name) for name in folders if (s := step_of(name)) is not None), reverse=True)
    skipped: list[tuple[str, str]] = []
    # whether a checkpoint-N here has a manifest: asked once, when it matters (a bucket: a folder
    # without one is always a push cut short)
    ours: bool | None = True if store.kind == "bucket" else None
    for stp, name in candidates:
        problems, chosen = _check(store, sha, name, folders[name])
        at = chosen.revision  # the pin this folder was read at (a repo's head: the commit it settled to)
        if not problems and chosen.manifest_bytes is None:
            if ours is None:
                ours = manifests_here(store, at, [n for _s, n in candidates])
            problems = [why] if (why := no_manifest_problem(ours, bucket=store.kind == "bucket")) else []
        if not problems and verifier is not None:
            problems, chosen = _verified(store, at, name, verifier, chosen)
        if not problems:
            pin = store.pin_of(at, name, chosen.manifest_bytes)  # a bucket: the manifest's sha256
            handle = CheckpointHandle(store.name, name, pin, stp, store.settings.endpoint)
            return LatestResult(handle, pin, skipped, chosen.manifest_bytes is not None,
                                chosen=replace(chosen, revision=pin))
        skipped.append((name, problems[0]))
    if sha != (given := store.resolve(sha)):  # listed by the branch's name: the answer names a commit
        sha = given or sha
    return LatestResult(None, sha if store.kind == "repo" else None, skipped)  # a bucket: no pin read


def _verified(store: Store, sha: str, name: str, verifier: Verifier,
              chosen: Chosen) -> tuple[list[str], Chosen]:
    """The signature check of a complete folder latest would choose: (problems, what was read)."""
    from ckpt_action.ops.signatures import latest_problem

    why, snap, check = latest_problem(store, sha, name, verifier, read=chosen.snapshot,
                                      manifest_bytes=chosen.manifest_bytes)
    return ([why] if why else []), Chosen(sha, name, chosen.manifest_bytes, snap, check, verifier)


def judge_candidates(store: Store, sha: str, folders: Mapping[str, str]) -> dict[str, tuple[Candidate, Chosen]]:
    """Each top-level ``checkpoint-N`` of ``folders`` (name to the id the listing gave it) as
    the retention rules and ``best`` see it: its step, its manifest's metrics, and the one
    verdict on it (``Candidate.incomplete`` says why it is not a complete checkpoint; a
    folder that could not be judged, an unreadable manifest or listing, is ``unreadable``),
    with what was read of it (one manifest read each, in parallel, and a listing where the
    store's content id does not settle it). No rule keeps a folder the verdict fails for
    itself, so a broken folder never takes a complete one's place."""
    names = sorted(name for name in folders if step_of(name) is not None)

    def one(name: str) -> tuple[Candidate, Chosen, bool]:
        step = step_of(name)
        assert step is not None
        try:
            problems, chosen, manifest = _judge(store, sha, name, folders[name])
        except IntegrityError as exc:  # this folder's manifest or listing: the others may be fine
            return (Candidate(name, step, None, f"its manifest cannot be read ({exc})", unreadable=str(exc),
                              incomplete=str(exc)), Chosen(sha, name, None), True)
        if manifest is None:
            return Candidate(name, step, incomplete=problems[0] if problems else None), chosen, False
        incomplete = problems[0] if problems else None
        if manifest.metrics_problem is not None:
            return (Candidate(name, step, None, f"its manifest's {manifest.metrics_problem}", incomplete=incomplete),
                    chosen, True)
        return Candidate(name, step, manifest.metrics, None, incomplete=incomplete), chosen, True

    with ThreadPoolExecutor(max_workers=8) as pool:
        read = dict(zip(names, pool.map(one, names), strict=True))
    ours = store.kind == "bucket" or any(has for _c, _ch, has in read.values())
    out: dict[str, tuple[Candidate, Chosen]] = {}
    for name, (cand, chosen, has) in read.items():
        if not has and cand.incomplete is None and (why := no_manifest_problem(ours, bucket=store.kind == "bucket")):
            cand = replace(cand, incomplete=why)
        out[name] = (cand, chosen)
    return out


def _head(store: Store, revision: str | None, *, settle: bool = True) -> tuple[str, dict[str, str]] | LatestResult:
    """The pin latest reads at and its top-level folders; or the answer when there is nothing
    to read (a missing repo, unless a revision was named: then its error; an empty one).
    With ``settle``, the pin may be one each read settles (:meth:`Store.head`); without, it is
    resolved first (what ``best``'s comparison of many folders needs: one pin for all)."""
    try:
        sha = store.head(revision) if settle else store.resolve(revision)
        if sha is None:
            return LatestResult(None, None, [])
        try:
            # A bucket's resolve asks nothing: its listing is what answers 404 for a missing one.
            return sha, store.folders(sha)
        except NotFoundError:
            if sha == (resolved := store.resolve(revision)):
                raise
        # Listed by name and not found: the branch is not there (an empty repo) or the repo is not.
        return (resolved, store.folders(resolved)) if resolved is not None else LatestResult(None, None, [])
    except NotFoundError:
        if revision is not None:
            raise
        return LatestResult(None, None, [], repo_missing=True)

def latest_best(store: Store, objective: Objective, revision: str | None = None,
                verifier: Verifier | None = None) -> LatestResult:
    """The complete ``checkpoint-N`` best by ``objective`` at the head of ``revision``: like
    :func:`latest`, with the candidates ordered by the metric (ties: the highest step)
    instead of by step. A folder without the metric, or whose manifest's metrics are
    malformed (passed over with why), is never chosen; none with it is "none"."""
    head = _head(store, revision, settle=False)
    if isinstance(head, LatestResult):
        return head
    sha, folders = head
    judged = judge_candidates(store, sha, folders)
    found = [cand for cand, _chosen in judged.values()]
    skipped = [(c.name, c.metrics_problem) for c in found if c.metrics_problem is not None and c.unreadable is None]
    skipped += [(c.name, c.incomplete) for c in found if c.incomplete is not None
                and (c.unreadable is not None or objective.metric in (c.metrics or {}))]
    for cand, value in ranked(found, objective):
        chosen = judged[cand.name][1]
        problems: list[str] = []
        if verifier is not None:
            problems, chosen = _verified(store, sha, cand.name, verifier, chosen)
        if not problems:
            handle = CheckpointHandle(store.name, cand.name, store.pin_of(sha, cand.name, chosen.manifest_bytes),
                                      cand.step, store.settings.endpoint)
            return LatestResult(handle, sha, skipped, True, chosen=chosen, chosen_by=(objective.metric, value))
        skipped.append((cand.name, problems[0]))
    return LatestResult(None, sha, skipped)


def _check(store: Store, sha: str, name: str, tree_id: str | None) -> tuple[list[str], Chosen]:
    """Is ``name`` at ``sha`` a complete checkpoint? (problems, what was read of it): the one
    verdict (:func:`_judge`), a folder whose manifest or listing cannot be read passed over
    with why."""
    try:
        problems, chosen, _manifest = _judge(store, sha, name, tree_id)
    except IntegrityError as exc:  # this folder's manifest or listing: the others may be fine
        return [str(exc)], Chosen(sha, name, None)
    return problems, chosen


def _judge(store: Store, sha: str, name: str, tree_id: str | None) -> tuple[list[str], Chosen, Manifest | None]:
    """The one verdict on ``name`` at ``sha`` (problems, what was read of it, its manifest).

    Fast path, one request: read the manifest and hold the folder's git tree id, as the
    listing gave it, to the manifest's files (:func:`~ckpt_action.checkpoint.verdict.tree_matches`);
    equal, the folder holds exactly those files. A folder without a manifest is judged by
    the caller, which knows whether its neighbours have one. Otherwise list the folder and
    judge it file by file (:func:`~ckpt_action.checkpoint.verdict.judge_folder`).
    """
    # A head pin (latest on a repo's default branch, listed by name) settles here, to the commit
    # the manifest was read at; the listing may be a moment older. Its tree id matching the
    # manifest says the folder holds exactly the manifest's files, and a push to the folder
    # since writes a new manifest, so a mismatch lists the folder again at the settled commit.
    data, sha = store.read_pinned(sha, f"{name}/{MANIFEST_NAME}", missing_ok=True)
    if data is None:
        return [], Chosen(sha, name, None), None
    manifest = Manifest.from_json(data)
    if tree_matches(manifest, data, tree_id):
        return ([] if manifest.complete else [UNFINISHED]), Chosen(sha, name, data), manifest
    snap = store.snapshot(sha, name, manifest_bytes=data)
    return snap.problems(), Chosen(sha, name, snap.manifest_bytes, snap), snap.manifest


@dataclass(frozen=True)
class CheckpointInfo:
    subfolder: str
    step: int | None
    complete: bool
    status: str
    """complete, foreign (no manifest), incomplete, mismatch, unreadable (the manifest
    cannot be parsed; ``problem`` says why)."""
    files: int
    size: int
    revision: str
    source: dict[str, str] | None = None
    problem: str | None = None
    """Why it is not complete (the first reason), None when it is."""
    metrics: dict[str, float] | None = None
    """What its manifest records it scored (None: nothing, or malformed: ``metrics_problem``)."""
    metrics_problem: str | None = None
    """Why its manifest's metrics field is unusable, None when it is fine or absent."""
    signed: bool = False
    """It holds a ``model.sig`` (whether it verifies is pull's and latest's question)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "subfolder": self.subfolder,
            "step": self.step,
            "complete": self.complete,
            "status": self.status,
            "files": self.files,
            "size": self.size,
            "revision": self.revision,
            "source": self.source,
            "problem": self.problem,
            "metrics": self.metrics,
            "metrics_problem": self.metrics_problem,
            "signed": self.signed,
        }


def describe(snap: Snapshot, manifests_here: bool = False) -> CheckpointInfo:
    """A folder as list shows it: the one verdict's status and first problem."""
    verdict = snap.verdict(manifests_here and step_of(snap.subfolder) is not None)
    problems, status = list(verdict.problems), verdict.status
    return CheckpointInfo(
        subfolder=snap.subfolder,
        step=snap.manifest.step if snap.manifest and snap.manifest.step is not None else step_of(snap.subfolder),
        complete=not problems,
        status=status,
        files=len(snap.files),
        size=sum(f.size for f in snap.files.values()),
        revision=snap.revision,
        source=snap.manifest.source if snap.manifest else None,
        problem=problems[0] if problems else None,
        metrics=snap.manifest.metrics if snap.manifest else None,
        metrics_problem=snap.manifest.metrics_problem if snap.manifest else None,
        signed=SIGNATURE_NAME in snap.files,
    )


def _unreadable(sha: str, root: str, files: dict[str, RemoteFile], why: str) -> CheckpointInfo:
    files = {p: f for p, f in files.items() if p != MANIFEST_NAME}
    return CheckpointInfo(subfolder=root, step=step_of(root), complete=False, status="unreadable",
                          files=len(files), size=sum(f.size for f in files.values()), revision=sha, problem=why)


def list_checkpoints(store: Store, revision: str | None = None) -> tuple[str | None, list[CheckpointInfo]]:
    """Every checkpoint at one SHA: top-level ``checkpoint-N`` folders and any folder with a manifest.

    One recursive listing of the repo (paged by the Hub), then one read per manifest. A
    folder whose manifest cannot be read is listed as ``unreadable``; a folder name that
    is not usable is skipped with a warning.
    """
    sha = store.resolve(revision)
    if sha is None:
        return None, []
    grouped, tainted = store.catalog(sha)
    roots = set(grouped)

    ours = store.kind == "bucket" or any(MANIFEST_NAME in grouped[r] for r in roots if step_of(r) is not None)

    def info(root: str) -> CheckpointInfo:
        if root in tainted:
            return _unreadable(sha, root, grouped[root], tainted[root])
        try:
            return describe(store.snapshot(sha, root, files=grouped[root]), ours)
        except UnreadableManifest as exc:
            return _unreadable(sha, root, grouped[root], str(exc))

    with ThreadPoolExecutor(max_workers=8) as pool:
        infos = list(pool.map(info, sorted(grouped)))
    infos.sort(key=lambda i: (i.step is None, -(i.step or 0), i.subfolder))
    return sha, infos
