"""The Python API: the CLI's commands as functions, for training code that runs in-process.

Each function checks its input like the CLI does (an :class:`~ckpt_action.errors.InputError`
before any request), takes the CLI's options as keywords (``endpoint``, ``token``,
``timeout``, ``retries``, ...) defaulting from the same environment variables
(``HF_ENDPOINT``, ``HF_TOKEN``, ``CKPT_*``), and calls the same core. Errors raise, as
subclasses of :class:`~ckpt_action.errors.CkptError`; nothing answers None for "could not
tell". Warnings the CLI prints (a missing repo, checkpoints passed over) go to the
``ckpt_action`` logger.

A round trip against a local Hub started here (no network, no account):

>>> import tempfile, ckpt_action as ckpt
>>> from pathlib import Path
>>> from ckpt_action.localhub import LocalHub
>>> work = Path(tempfile.mkdtemp())
>>> _ = (work / "out" / "checkpoint-300").mkdir(parents=True)
>>> _ = (work / "out" / "checkpoint-300" / "model.safetensors").write_bytes(b"weights")
>>> with LocalHub(work / "hub") as hub:
...     h = ckpt.push(work / "out" / "checkpoint-300", repo="org/run", step=300, endpoint=hub.url)
...     found = ckpt.latest("org/run", endpoint=hub.url)
...     path = ckpt.pull(found, work / "resume", endpoint=hub.url)
>>> found == h, found.subfolder, len(found.revision)
(True, 'checkpoint-300', 40)
>>> (path / "model.safetensors").read_bytes()
b'weights'
"""

from __future__ import annotations

import logging
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_action import names
from ckpt_action.disk.source import local_dir_to_push
from ckpt_action.disk.target import pull_target

from .errors import InputError, NoCheckpointError, NotFoundError
from .handle import SHA_RE, CheckpointHandle
from .settings import Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ckpt_action.disk.cache import CacheConfig
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.coordination import Session
    from ckpt_action.ops.discover import CheckpointInfo, LatestResult
    from ckpt_action.ops.pull import PullResult, Selection
    from ckpt_action.ops.push import PushResult
    from ckpt_action.wandb.pointer import PointerResult

log = logging.getLogger("ckpt_action")
PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune` deleted (or, with ``dry_run``, would delete) and why the rest stays."""

    revision: str | None
    """The commit holding the pruned repo (the head read, for a dry run or nothing to delete)."""
    deleted: list[str]
    kept: dict[str, str] = field(default_factory=dict)
    """Each kept ``checkpoint-N`` with why it is kept."""
    dry_run: bool = False


# --------------------------------------------------------------------------- the core, in one place
# Every call into push/pull's core goes through these two functions, so a change of the
# core's signatures is adapted here and nowhere else in the API or the integrations.


def _core_push(settings: Settings, repo: str, local_dir: Path, subfolder: str, *, step: int | None,
               private: bool, commit_message: str | None, session: Session | None = None) -> PushResult:
    """``session``: this rank's part of a push from many ranks (see :mod:`ckpt_action.ops.distpush`)."""
    from ckpt_action.hub.repo import RemoteRepo

    remote = RemoteRepo(settings, repo)
    if session is not None:
        from ckpt_action.ops.distpush import push_distributed

        return push_distributed(remote, local_dir, subfolder, session, step=step, private=private,
                                commit_message=commit_message)
    from ckpt_action.ops.push import push as core_push

    return core_push(remote, local_dir, subfolder, step=step, private=private, commit_message=commit_message)


def _core_pull(remote: RemoteRepo, subfolder: str, revision: str | None, sha: str | None, target: Path, *,
               force: bool, select: Selection | None = None, cache: CacheConfig | None = None) -> PullResult:
    from ckpt_action.ops.pull import pull as core_pull

    return core_pull(remote, subfolder, revision, target, force=force, sha=sha, select=select, cache=cache)


def _settings(endpoint: str | None, token: str | None, timeout: float | None, retries: int | None) -> Settings:
    return Settings.from_env(endpoint=endpoint, token=token or None, timeout=timeout, retries=retries)


def _remote(settings: Settings, repo: str) -> RemoteRepo:
    from ckpt_action.hub.repo import RemoteRepo

    return RemoteRepo(settings, repo)


def _warn_skipped(res: LatestResult, repo: str) -> None:
    if res.repo_missing:
        log.warning("%s does not exist, or this token cannot see it: no checkpoint", repo)
    for name, why in res.skipped:
        log.warning("skipped %s: %s", name, why)


def _find_latest(remote: RemoteRepo, revision: str | None) -> CheckpointHandle | None:
    from ckpt_action.ops.discover import latest as core_latest

    res = core_latest(remote, revision)
    _warn_skipped(res, remote.repo)
    return res.handle


def _source(source: CheckpointHandle | str, subfolder: str | None, revision: str | None,
            endpoint: str | None) -> tuple[str, str | None, str | None, str | None]:
    """(repo, subfolder, revision, endpoint) from a handle or a repo id plus options.

    A handle pins everything; options may repeat it but not contradict it. Its endpoint is
    used when none is configured (as the CLI does with a pointer file).
    """
    if isinstance(source, CheckpointHandle):
        if subfolder is not None and subfolder.rstrip("/") != source.subfolder:
            raise InputError(f"subfolder={subfolder!r} disagrees with the handle's {source.subfolder!r}: drop it")
        if revision is not None and revision != source.revision:
            raise InputError(f"revision={revision!r} disagrees with the handle's {source.revision}: drop it")
        if endpoint is None and not os.environ.get("HF_ENDPOINT"):
            endpoint = source.endpoint
        return (names.repo_id(source.repo), names.subfolder(source.subfolder),
                names.revision(source.revision), endpoint)
    if not isinstance(source, str):
        raise InputError(f"expected a CheckpointHandle or a repo id OWNER/NAME, got {type(source).__name__}")
    return (names.repo_id(source), names.subfolder(subfolder) if subfolder is not None else None,
            names.revision(revision), endpoint)


# --------------------------------------------------------------------------- push, latest, pull


def push(
    local_dir: PathLike,
    repo: str,
    *,
    step: int | None = None,
    subfolder: str | None = None,
    private: bool = True,
    commit_message: str | None = None,
    distributed: bool = False,
    group: Any = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle:
    """Push ``local_dir`` to ``repo/<subfolder>/`` and return the handle of the commit holding it complete.

    ``step`` alone names the subfolder ``checkpoint-<step>``; ``subfolder`` names it
    otherwise (``sft``). The folder on the Hub ends up exactly equal to ``local_dir``, its
    manifest committed with the last files; identical content makes no commit and returns
    the current SHA. A repo that does not exist is created, private unless ``private=False``.

    >>> ckpt.push("out/checkpoint-300", repo="org/run", step=300)  # doctest: +SKIP
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', step=300, ...)
    >>> ckpt.push("out/sft", repo="org/run", subfolder="sft").subfolder  # doctest: +SKIP
    'sft'

    ``distributed=True``, called on every rank of an initialized ``torch.distributed``
    process group (or of ``group``): each rank uploads the files of its own ``local_dir``
    (a path several ranks hold must be the same bytes on each, and is uploaded once),
    rank 0 makes the commit, and every rank returns the same handle. If any rank fails,
    or does not join within ``CKPT_DISTRIBUTED_TIMEOUT`` seconds, nothing is committed
    and every rank raises the same :class:`~ckpt_action.errors.DistributedError`. A
    process outside any process group pushes alone, as without it.

    >>> ckpt.push(f"out/checkpoint-300", repo="org/run", step=300, distributed=True)  # doctest: +SKIP
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', step=300, ...)
    """
    repo = names.repo_id(repo)
    subfolder, step = names.push_target(subfolder, step)
    settings = _settings(endpoint, token, timeout, retries)
    names.token_for_write(settings.token, settings.endpoint)
    if group is not None and not distributed:
        raise InputError("group= goes with distributed=True: add it, or drop group=")
    res = push_on_ranks(settings, repo, os.fspath(local_dir), subfolder, step=step, private=private,
                        commit_message=commit_message, group=group) if distributed else None
    if res is None:
        path = local_dir_to_push(os.fspath(local_dir))
        res = _core_push(settings, repo, path, subfolder, step=step, private=private, commit_message=commit_message)
    return res.handle


def push_on_ranks(settings: Settings, repo: str, local_dir: str, subfolder: str, *, step: int | None,
                  private: bool, commit_message: str | None, group: Any = None) -> PushResult | None:
    """This rank's part of a push from every rank of ``group`` (None: the job's process
    group); None when this process is in no process group (push alone). For the doors
    that checked their input already: :func:`push` and ``ckpt-action push --distributed``."""
    from ckpt_action.ops.torchgroup import session as group_session

    session = group_session(group, settings.distributed_timeout, f"push {subfolder}")
    if session is None:
        return None
    with session:
        # Checked inside the session: a bad dir on one rank fails every rank at once.
        path = session.run("checking the local dir", lambda: local_dir_to_push(local_dir, allow_empty=True))
        return _core_push(settings, repo, path, subfolder, step=step, private=private,
                          commit_message=commit_message, session=session)


def joined_process_group(timeout: float, flag: str = "--distributed") -> AbstractContextManager[None]:
    """For a process started by torchrun that has not joined its job's process group (the
    CLI): join it from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (gloo)
    for the duration, and leave it after. Without torch, an InputError naming the extra."""
    from ckpt_action.ops.torchgroup import joined_from_env

    return joined_from_env(timeout, flag)


def latest(
    repo: str,
    *,
    revision: str | None = None,
    require: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle | None:
    """The highest complete ``checkpoint-N`` of ``repo``, pinned to the SHA it was read at.

    None only when there is no complete checkpoint: the repo or its branch does not exist
    yet, or holds none. Any failure to tell (401, 5xx after retries, a timeout, an unknown
    ``revision``) raises. ``require=True`` raises
    :class:`~ckpt_action.errors.NoCheckpointError` instead of returning None.

    >>> ckpt.latest("org/run")  # doctest: +SKIP
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', step=300, ...)
    """
    repo = names.repo_id(repo)
    revision = names.revision(revision)
    handle = _find_latest(_remote(_settings(endpoint, token, timeout, retries), repo), revision)
    if handle is None and require:
        raise NoCheckpointError(f"no complete checkpoint-N in {repo}")
    return handle


def pull(
    source: CheckpointHandle | str,
    local_dir: PathLike,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    force: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    cache_dir: PathLike | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> Path:
    """Download a checkpoint into ``local_dir`` (its files, not a nested folder) and return the path.

    ``source`` is a handle (from :func:`push` or :func:`latest`: exactly that folder at that
    SHA) or a repo id with ``subfolder`` and ``revision`` (a SHA, branch or tag; default
    main's head). A repo id without ``subfolder`` pulls the latest complete checkpoint
    (:class:`~ckpt_action.errors.NoCheckpointError` when there is none). Every file is
    verified before ``local_dir`` appears; a failure leaves it as it was. A ``local_dir``
    holding an earlier pull is updated in place (only what changed is downloaded);
    ``force=True`` replaces one that also holds files added since, never any other dir.
    ``include``/``exclude`` glob patterns pull part of the checkpoint; ``cache_dir`` (else
    ``CKPT_CACHE_DIR``) keeps verified files across pulls.

    >>> ckpt.pull(found, "resume/")  # doctest: +SKIP
    PosixPath('/work/resume')
    >>> ckpt.pull("org/run", "sft-copy/", subfolder="sft", revision=sha)  # doctest: +SKIP
    PosixPath('/work/sft-copy')
    """
    from ckpt_action.disk.cache import CacheConfig
    from ckpt_action.ops.pull import Selection

    repo, sub, rev, endpoint = _source(source, subfolder, revision, endpoint)
    target = pull_target(os.fspath(local_dir), force=force)
    select = Selection.from_options(tuple(include), tuple(exclude))
    cache = CacheConfig.from_options(os.fspath(cache_dir) if cache_dir is not None else None, target)
    remote = _remote(_settings(endpoint, token, timeout, retries), repo)
    sha = rev if rev is not None and SHA_RE.match(rev) else None
    if sub is None:
        found = _find_latest(remote, rev)
        if found is None:
            raise NoCheckpointError(f"no complete checkpoint-N in {repo} to pull")
        sub, sha = found.subfolder, found.revision
    return _core_pull(remote, sub, rev, sha, target, force=force, select=select, cache=cache).local_dir


# --------------------------------------------------------------------------- W&B


def log_pointer(
    handle: CheckpointHandle,
    run: Any = None,
    *,
    artifact_name: str | None = None,
    extra: dict[str, Any] | None = None,
    project: str | None = None,
    entity: str | None = None,
) -> PointerResult:
    """Log a W&B ``model-pointer`` artifact for ``handle`` (aliases ``latest`` and ``step-N``).

    It goes to ``run``, else to the run active in this process (``wandb.run``); neither is
    finished here. With no run at all, ``project`` (default ``WANDB_PROJECT``) logs it from
    a short run of its own, as the CLI does; without one either, it raises
    :class:`~ckpt_action.wandb.pointer.WandbError`, as it does for any W&B failure.

    >>> run = wandb.init(project="llama-sft")  # doctest: +SKIP
    >>> ckpt.log_pointer(h).aliases  # doctest: +SKIP
    ('latest', 'step-300')
    """
    from ckpt_action.wandb import pointer as wandb_pointer

    if run is None:
        run = wandb_pointer.active_run()
    if run is None:
        project = project or os.environ.get("WANDB_PROJECT")
        if not project:
            raise wandb_pointer.WandbError(
                "no active W&B run: call wandb.init() first, pass run=, or give project= (or WANDB_PROJECT)")
        return wandb_pointer.log_pointer(handle, project=project, entity=entity or os.environ.get("WANDB_ENTITY"),
                                         artifact_name=artifact_name, extra=extra)
    return wandb_pointer.log_pointer_to_run(handle, run, artifact_name=artifact_name, extra=extra)


def active_wandb_run() -> Any:
    """The W&B run active in this process, or None (a disabled run counts as none); W&B is
    imported only if it already is."""
    from ckpt_action.wandb import pointer as wandb_pointer

    return wandb_pointer.active_run()


# --------------------------------------------------------------------------- promote, list, prune


def promote(
    source: CheckpointHandle | str,
    to: str,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    to_repo: str | None = None,
    tag: str | None = None,
    branch: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle:
    """Copy a checkpoint to the folder ``to`` (``release``) in one commit, and return the target's handle.

    In the same repo the Hub copies the files server-side (no bytes move); with
    ``to_repo`` they stream through this machine, verified. ``tag`` tags the resulting
    commit (a tag pointing elsewhere raises :class:`~ckpt_action.errors.ConflictError`);
    ``branch`` commits on that branch, created from the source SHA. Re-running is a no-op.

    >>> ckpt.promote(found, "release", tag="v1.0")  # doctest: +SKIP
    CheckpointHandle(repo='org/run', subfolder='release', revision='9ac0…', step=300, ...)
    """
    repo, sub, rev, endpoint = _source(source, subfolder, revision, endpoint)
    if sub is None:
        raise InputError("promote needs subfolder= (or a handle): name the checkpoint to promote")
    to = names.subfolder(to, flag="to")
    tag = names.revision(tag)
    branch = names.revision(branch)
    target_repo = names.repo_id(to_repo) if to_repo else None
    if target_repo and branch:
        raise InputError("branch= does not go with to_repo=: promote into the other repo's main")
    settings = _settings(endpoint, token, timeout, retries)
    names.token_for_write(settings.token, settings.endpoint)
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.release import promote as core_promote

    remote = RemoteRepo(settings, repo)
    target = RemoteRepo(settings, target_repo, api=remote.api) if target_repo else None
    return core_promote(remote, sub, rev, to, tag=tag, branch=branch, target=target).handle


def list_checkpoints(
    repo: str,
    *,
    revision: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> list[CheckpointInfo]:
    """Every checkpoint of ``repo`` at one SHA, newest step first, with its status.

    Each :class:`~ckpt_action.ops.discover.CheckpointInfo` has ``subfolder``, ``step``,
    ``complete``, ``status`` (complete, foreign, incomplete, mismatch), ``files``, ``size``
    and the ``revision`` it was read at. A repo that does not exist has none (a warning
    says so); any other failure raises.

    >>> [(i.subfolder, i.status) for i in ckpt.list_checkpoints("org/run")]  # doctest: +SKIP
    [('checkpoint-300', 'complete'), ('checkpoint-200', 'complete'), ('sft', 'complete')]
    """
    repo = names.repo_id(repo)
    revision = names.revision(revision)
    from ckpt_action.ops.discover import list_checkpoints as core_list

    remote = _remote(_settings(endpoint, token, timeout, retries), repo)
    try:
        remote.resolve(revision)
    except NotFoundError:
        if revision is not None:
            raise
        log.warning("%s does not exist, or this token cannot see it: no checkpoints", repo)
        return []
    return core_list(remote, revision)[1]


def prune(
    repo: str,
    keep_last: int,
    *,
    dry_run: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> PruneResult:
    """Delete all but the newest ``keep_last`` ``checkpoint-N`` folders, in one commit.

    Never deleted: the latest complete checkpoint, folders not named ``checkpoint-N``
    (``sft``, ``release``), the source of a promoted folder, a checkpoint a tag was made
    for. ``dry_run=True`` only reports.

    >>> ckpt.prune("org/run", keep_last=2, dry_run=True).deleted  # doctest: +SKIP
    ['checkpoint-100']
    """
    repo = names.repo_id(repo)
    keep = names.positive(keep_last, "keep_last")
    if keep is None:
        raise InputError("keep_last is required: how many of the newest checkpoint-N to keep")
    settings = _settings(endpoint, token, timeout, retries)
    if not dry_run:
        names.token_for_write(settings.token, settings.endpoint)
    from ckpt_action.ops.release import prune as core_prune

    plan, sha = core_prune(_remote(settings, repo), keep, dry_run=dry_run)
    return PruneResult(sha, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run)
