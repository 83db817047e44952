"""The Python API: every command's steps, once. The CLI is a client of these functions.

Each command runs here as check inputs -> settings -> repo -> operation -> result, in one
function returning the full result (:func:`push_checkpoint`, :func:`find_latest`,
:func:`pull_checkpoint`, :func:`promote_checkpoint`, :func:`list_repo`, :func:`prune`);
the CLI parses its flags, calls them and renders what they return, and the public
``ckpt.push``/``ckpt.pull``/... are the same functions answering the handle or path. The
keywords are the CLI's options (``endpoint``, ``token``, ``timeout``, ``retries``, ...)
defaulting from the same environment variables (``HF_ENDPOINT``, ``HF_TOKEN``,
``CKPT_*``). Errors raise, as subclasses of :class:`~ckpt_action.errors.CkptError`
naming parameters as ``tag=`` here and ``--tag`` on the CLI; nothing answers None for
"could not tell". Warnings (a missing repo, checkpoints passed over) go to ``warn`` where a
function takes one, else to the ``ckpt_action`` logger. A call changes nothing global: no
environment variable, no huggingface_hub constant, and a client factory set with
``huggingface_hub.set_client_factory`` keeps making the clients (:mod:`ckpt_action.hub.transport`).

Longer than this package's modules should be (about 400 lines), on purpose: it is the one
place every command's steps live, so a new option or check lands here once; most of the
length is the public functions' signatures and docstrings, which are the API's contract.

A round trip against a local Hub started here (no network, no account):

>>> import tempfile, ckpt_action as ckpt
>>> from pathlib import Path
>>> from ckpt_localhub import LocalHub
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

import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ckpt_action import names
from ckpt_action.disk.source import local_dir_to_push, tool_files
from ckpt_action.disk.target import check_target

from .errors import InputError, LocalIOError, NoCheckpointError, NotFoundError, param, param_on, render
from .handle import BUCKET_PIN_RE, SHA_RE, CheckpointHandle
from .settings import Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ckpt_action.checkpoint.signing import LoadedSigner
    from ckpt_action.checkpoint.verifying import Verifier
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.discover import CheckpointInfo, LatestResult
    from ckpt_action.ops.pull import PullResult
    from ckpt_action.ops.push import PushResult
    from ckpt_action.ops.release import PromoteResult
    from ckpt_action.wandb.sdk import PointerResult

log = logging.getLogger("ckpt_action")
PathLike = str | os.PathLike[str]
Warn = Callable[[str], None]

# The operations' result types, for the doors (the CLI renders them without importing the
# operations): resolved on first use, like the package's own names.
_RESULTS = {
    "PushResult": "ckpt_action.ops.push",
    "PullResult": "ckpt_action.ops.pull",
    "LatestResult": "ckpt_action.ops.discover",
    "CheckpointInfo": "ckpt_action.ops.discover",
    "PromoteResult": "ckpt_action.ops.release",
    "PointerResult": "ckpt_action.wandb.sdk",
    "WandbError": "ckpt_action.wandb.sdk",
}


def __getattr__(name: str) -> Any:
    if name in _RESULTS:
        from importlib import import_module

        return getattr(import_module(_RESULTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_F = TypeVar("_F", bound=Callable[..., Any])


def _local_errors(fn: _F) -> _F:
    """A local I/O failure (a file that cannot be read, a dir that cannot be written, a
    full disk) raised anywhere under an API call leaves it as :class:`LocalIOError`, a
    CkptError naming the path, never as a bare OSError. Network failures are the
    transport's to translate (and are RemoteError by then)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConnectionError, TimeoutError):
            raise
        except OSError as exc:
            where = f" on {exc.filename}" if exc.filename else ""
            raise LocalIOError(f"{fn.__name__}: a local file operation failed{where} ({exc.strerror or exc}):"
                               " check the permissions and free space there") from exc

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune` deleted (or, with ``dry_run``, would delete) and why the rest stays."""

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
    """What :func:`list_repo` read: every checkpoint of ``repo`` at one SHA, newest step first."""

    repo: str
    revision: str | None
    """The SHA read; None when the repo does not exist (or this token cannot see it)."""
    checkpoints: list[CheckpointInfo]


# --------------------------------------------------------------------------- shared steps


_CHECKS_ONLY: ContextVar[bool] = ContextVar("ckpt_action_checks_only", default=False)


class InputsChecked(BaseException):
    """Raised in place of a command's first request (to the Hub or W&B) under
    :func:`checks_only`: every check of its inputs passed. A BaseException, so no handler
    for errors takes it for one."""


@contextmanager
def checks_only() -> Iterator[None]:
    """Run a command's steps only up to its first request: every check it makes of its
    inputs (names, bounds, settings, the local dir, key files) runs as in the real run, and
    :class:`InputsChecked` is raised where it would first reach the network or write. The
    action's container runtime validates the step this way before creating any dir."""
    token = _CHECKS_ONLY.set(True)
    try:
        yield
    finally:
        _CHECKS_ONLY.reset(token)


def _first_request() -> None:
    """Where a command leaves its checks for the network: the end of a checks-only run."""
    if _CHECKS_ONLY.get():
        raise InputsChecked


def _settings(endpoint: str | None, token: str | None, timeout: float | None, retries: int | None) -> Settings:
    return Settings.from_env(endpoint=endpoint, token=token or None, timeout=timeout, retries=retries)


def _remote(settings: Settings, repo: str, api: Any = None) -> RemoteRepo:
    _first_request()
    from ckpt_action.stores import RepoStore, open_store

    store = open_store(settings, repo, api=api)
    # A repo as the API hands it on (its RemoteRepo, which the operations take as its store); a bucket: its store
    return store.remote if isinstance(store, RepoStore) else store  # type: ignore[return-value]


def _warn(warn: Warn | None) -> Warn:
    return warn if warn is not None else _log_warning


def _log_warning(message: str) -> None:
    """A warning as Python callers read it: its parameters spelled ``require=True``."""
    log.warning("%s", render(message, "api"))


def signer(*, signing_key: PathLike | None = None, signing_certificate: PathLike | None = None,
           signing_chain: PathLike | Sequence[PathLike] | None = None, sign_keyless: bool = False,
           sigstore_trust_config: PathLike | None = None) -> LoadedSigner | None:
    """The signer push and promote sign with (None: unsigned), checked and loaded before any
    request: the key read (its password only from ``CKPT_SIGNING_KEY_PASSWORD``), the
    certificate matched to it, or for keyless signing the ambient GitHub Actions OIDC token
    found (the workflow needs ``permissions: id-token: write``). Messages name the options
    as parameter references, which each door spells (``--signing-key``, ``signing_key=``)."""
    if not (signing_key or signing_certificate or signing_chain or sign_keyless):
        return None  # model_signing stays unimported
    from ckpt_action.checkpoint.signing import SigningConfig

    config = SigningConfig.from_options(signing_key=signing_key, signing_certificate=signing_certificate,
                                        signing_chain=signing_chain, sign_keyless=sign_keyless,
                                        trust_config=sigstore_trust_config, names=param)
    return config.load(names=param) if config is not None else None


def verifier(*, verify_key: PathLike | None = None, verify_certificate_chain: PathLike | None = None,
             verify_identity: str | None = None, verify_issuer: str | None = None,
             sigstore_trust_config: PathLike | None = None, verify_min_step: int | None = None,
             verify_require_provenance: bool = False) -> Verifier | None:
    """The check pull and latest apply to ``model.sig`` (None: none), loaded before any
    request: a public key, a CA certificate chain, or a Sigstore identity and issuer
    (``https://github.com/ORG/REPO`` alone accepts any workflow of that repo). A signature
    proves who signed which bytes for which repo, folder and step, not that they are the
    newest: ``verify_min_step`` refuses a signed step below it (a rollback),
    ``verify_require_provenance`` a folder without a signed provenance statement."""
    if not (verify_key or verify_certificate_chain or verify_identity or verify_issuer
            or verify_min_step is not None or verify_require_provenance):
        return None
    from ckpt_action.checkpoint.verifying import VerifyConfig

    config = VerifyConfig.from_options(verify_key=verify_key, verify_certificate_chain=verify_certificate_chain,
                                       verify_identity=verify_identity, verify_issuer=verify_issuer,
                                       trust_config=sigstore_trust_config, verify_min_step=verify_min_step,
                                       verify_require_provenance=verify_require_provenance, names=param)
    return config.load(names=param) if config is not None else None


def missing_repo(repo: str, what: str = "checkpoint") -> str:
    """The warning for a repo that does not exist, or that this token cannot see."""
    return f"{repo} does not exist, or this token cannot see it: no {what}"


def no_checkpoint(repo: str, purpose: str = "") -> NoCheckpointError:
    """The error for a repo holding no complete checkpoint (exit 3)."""
    return NoCheckpointError(f"no complete checkpoint-N in {repo}{purpose}")


def _latest(remote: RemoteRepo, revision: str | None, warn: Warn | None,
            verify: Verifier | None = None) -> LatestResult:
    from ckpt_action.ops.discover import latest as core_latest

    res = core_latest(remote, revision, verify)
    say = _warn(warn)
    missing = res.missing_warning(remote.repo, token=bool(remote.settings.token), require=param_on("require"))
    if missing:
        say(missing)
    for name, why in res.skipped:
        say(f"skipped {name}: {why}")
    return res


def _source(source: CheckpointHandle | str, subfolder: str | None,
            revision: str | None) -> tuple[str, str | None, str | None]:
    """(repo, subfolder, revision) from a handle or a repo id plus options.

    A handle pins everything; options may repeat it but not contradict it. Its endpoint is
    never adopted: see :func:`_settings_for`.
    """
    if isinstance(source, CheckpointHandle):
        if subfolder is not None and subfolder.rstrip("/") != source.subfolder:
            raise InputError(f"{param('subfolder')} {subfolder!r} disagrees with the handle's {source.subfolder!r}:"
                             " drop it", param="subfolder")
        if revision is not None and revision != source.revision:
            raise InputError(f"{param('revision')} {revision!r} disagrees with the handle's {source.revision}: drop it",
                             param="revision")
        return names.repo_id(source.repo), names.subfolder(source.subfolder), names.revision(source.revision)
    if not isinstance(source, str):
        raise InputError(f"expected a CheckpointHandle or a repo id OWNER/NAME, got {type(source).__name__}")
    return (names.repo_id(source), names.subfolder(subfolder) if subfolder is not None else None,
            names.revision(revision))


def _settings_for(source: CheckpointHandle | str, endpoint: str | None, token: str | None,
                  timeout: float | None, retries: int | None) -> Settings:
    """Settings for reading ``source``: the token goes only to the configured endpoint
    (``endpoint=``, else ``HF_ENDPOINT``, else the Hub), so a handle naming another host is
    refused, as the CLI refuses such a pointer; ``endpoint=`` set to its host trusts it."""
    settings = _settings(endpoint, token, timeout, retries)
    if isinstance(source, CheckpointHandle):
        names.check_origin(source.endpoint, settings.endpoint)
    return settings


# --------------------------------------------------------------------------- push, latest, pull


def push_checkpoint(
    local_dir: PathLike,
    repo: str,
    *,
    step: int | None = None,
    subfolder: str | None = None,
    private: bool = True,
    commit_message: str | None = None,
    signing_key: PathLike | None = None,
    signing_certificate: PathLike | None = None,
    signing_chain: PathLike | Sequence[PathLike] | None = None,
    sign_keyless: bool = False,
    sigstore_trust_config: PathLike | None = None,
    distributed: bool = False,
    group: Any = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    join_job: bool = False,
    note: Warn | None = None,
) -> PushResult:
    """:func:`push`, answering the full :class:`~ckpt_action.ops.push.PushResult`: the
    handle, the commits made, the files uploaded and deleted, and who signed.

    ``join_job``: for a process started by torchrun that has not joined its job's process
    group (``ckpt-action push --distributed``): with ``distributed``, join it from
    ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (gloo) for the push and
    leave it after; without torch, an InputError naming the ``[distributed]`` extra.

    ``note``: where the one line naming the tool's files left out of the push goes (a
    pulled dir's record, an old manifest, signature or statement: :func:`left_out_note`);
    default the ``ckpt_action`` logger, at INFO.
    """
    from ckpt_action.ops.push import push as core_push

    repo = names.repo_id(repo)
    subfolder, step = names.push_target(subfolder, step)
    if group is not None and not distributed:
        raise InputError(f"{param('group')} goes with {param('distributed')}True: add it, or drop {param('group')}",
                         param="group")
    # With distributed each rank checks its own dir inside the push, so that a bad one
    # fails every rank at once.
    path = None if distributed else local_dir_to_push(os.fspath(local_dir))
    if commit_message is not None:
        commit_message = names.commit_message(commit_message)
    settings = _settings(endpoint, token, timeout, retries)
    names.token_for_write(settings.token, settings.endpoint)
    sign = signer(signing_key=signing_key, signing_certificate=signing_certificate,
                  signing_chain=signing_chain, sign_keyless=sign_keyless,
                  sigstore_trust_config=sigstore_trust_config)
    if path is not None:
        from ckpt_action.checkpoint.sealing import refuse_written_folders

        refuse_written_folders(path, signed=sign is not None)
    remote = _remote(settings, repo)
    if distributed:
        if sign is not None:
            raise InputError(f"{param('distributed')} does not sign yet: sign with a promote of the pushed"
                             f" checkpoint, or drop {param('signing_key')}/{param('sign_keyless')}",
                             param="distributed")
        with _joined_job(settings.distributed_timeout) if join_job else nullcontext():
            res = _push_on_ranks(remote, os.fspath(local_dir), subfolder, step=step, private=private,
                                 commit_message=commit_message, group=group)
        if res is not None:
            return res
        path = local_dir_to_push(os.fspath(local_dir))  # in no process group: a push alone
    assert path is not None
    left_out = tool_files(path)
    res = core_push(remote, path, subfolder, step=step, private=private, commit_message=commit_message,
                    signer=sign)
    if not left_out:
        return res
    res = replace(res, left_out=left_out)
    (note or _log_note)(left_out_note(res))
    return res


def left_out_note(res: PushResult) -> str:
    """The one line saying which of ckpt-action's own files a push left out of the local dir
    (a pulled dir's record; a manifest, signature or statement, replaced by the push's own)."""
    from ckpt_action.checkpoint.signing import SIGNATURE_NAME

    line = (f"not uploaded from {param('local_dir')}: {', '.join(res.left_out)} (ckpt-action's own files);"
            f" the push wrote its own manifest" + (", provenance and signature" if res.signer else ""))
    if SIGNATURE_NAME in res.left_out and not res.signer:
        line += f" and no signature: the old {SIGNATURE_NAME} signed another folder ({param('signing_key')} signs"
        line += " this one)"
    return line


def _log_note(message: str) -> None:
    log.info("%s", render(message, "api"))


def _push_on_ranks(remote: RemoteRepo, local_dir: str, subfolder: str, *, step: int | None, private: bool,
                   commit_message: str | None, group: Any) -> PushResult | None:
    """This rank's part of a push from every rank of ``group`` (None: the job's process
    group); None when this process is in no process group (push alone)."""
    from ckpt_action.ops.distpush import agree, identity, push_distributed
    from ckpt_action.ops.torchgroup import session as group_session

    session = group_session(group, remote.settings.distributed_timeout, f"push {subfolder}")
    if session is None:
        return None
    with session:
        agree(session, identity(remote, subfolder, step=step, private=private, commit_message=commit_message))
        # Checked inside the session: a bad dir on one rank fails every rank at once.
        path = session.run("checking the local dir", lambda: local_dir_to_push(local_dir, allow_empty=True))
        return push_distributed(remote, path, subfolder, session, step=step, private=private,
                                commit_message=commit_message)


def _joined_job(timeout: float) -> AbstractContextManager[None]:
    from ckpt_action.ops.torchgroup import joined_from_env

    return joined_from_env(timeout)


@_local_errors
def push(
    local_dir: PathLike,
    repo: str,
    *,
    step: int | None = None,
    subfolder: str | None = None,
    private: bool = True,
    commit_message: str | None = None,
    signing_key: PathLike | None = None,
    signing_certificate: PathLike | None = None,
    signing_chain: PathLike | Sequence[PathLike] | None = None,
    sign_keyless: bool = False,
    sigstore_trust_config: PathLike | None = None,
    distributed: bool = False,
    group: Any = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle:
    """Push ``local_dir`` to ``repo/<subfolder>/`` and return the handle of the commit holding it complete.

    With a signer (``signing_key=``, plus ``signing_certificate=``/``signing_chain=``, or
    ``sign_keyless=True``; see :func:`signer`) the same commit as the manifest writes
    ``model.sig`` and the signed provenance statement.

    ``step`` alone names the subfolder ``checkpoint-<step>``; ``subfolder`` names it
    otherwise (``sft``). The folder on the Hub ends up exactly equal to ``local_dir``, its
    manifest committed with the last files; identical content makes no commit and returns
    the current SHA. A repo that does not exist is created, private unless ``private=False``.

    >>> ckpt.push("out/checkpoint-300", repo="org/run", step=300)  # doctest: +ELLIPSIS
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='...', step=300, endpoint='http://127.0.0.1:...')
    >>> ckpt.push("out/sft", repo="org/run", subfolder="sft").subfolder
    'sft'

    ``distributed=True``, called on every rank of an initialized ``torch.distributed``
    process group (or of ``group``), each with the same ``repo``, ``step``, ``subfolder``,
    ``private``, ``commit_message`` and endpoint (a rank that differs fails every rank before
    any upload, naming it): each rank uploads the files of its own ``local_dir``
    (a path several ranks hold must be the same bytes on each, and is uploaded once),
    rank 0 makes the commit, and every rank returns the same handle. If any rank fails,
    or does not join within ``CKPT_DISTRIBUTED_TIMEOUT`` seconds, nothing is committed
    and every rank raises the same :class:`~ckpt_action.errors.DistributedError`. A
    process outside any process group pushes alone, as without it.

    On every rank of a ``torchrun`` job (a process group is needed, so this example is not run here)::

        ckpt.push(f"out/checkpoint-300", repo="org/run", step=300, distributed=True)
        # -> CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', step=300, ...)
    """
    return push_checkpoint(local_dir, repo, step=step, subfolder=subfolder, private=private,
                           commit_message=commit_message, signing_key=signing_key,
                           signing_certificate=signing_certificate, signing_chain=signing_chain,
                           sign_keyless=sign_keyless, sigstore_trust_config=sigstore_trust_config,
                           distributed=distributed, group=group,
                           endpoint=endpoint, token=token, timeout=timeout, retries=retries).handle


def find_latest(
    repo: str,
    *,
    revision: str | None = None,
    verify_key: PathLike | None = None,
    verify_certificate_chain: PathLike | None = None,
    verify_identity: str | None = None,
    verify_issuer: str | None = None,
    sigstore_trust_config: PathLike | None = None,
    verify_min_step: int | None = None,
    verify_require_provenance: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    warn: Warn | None = None,
) -> LatestResult:
    """:func:`latest`, answering the full :class:`~ckpt_action.ops.discover.LatestResult`
    (the handle or None, the SHA read, whether it has a manifest, what was skipped); the
    warnings go to ``warn`` (default: the ``ckpt_action`` logger)."""
    repo = names.repo_id(repo)
    revision = names.revision(revision)
    check = verifier(verify_key=verify_key, verify_certificate_chain=verify_certificate_chain,
                     verify_identity=verify_identity, verify_issuer=verify_issuer,
                     sigstore_trust_config=sigstore_trust_config, verify_min_step=verify_min_step,
                     verify_require_provenance=verify_require_provenance)
    return _latest(_remote(_settings(endpoint, token, timeout, retries), repo), revision, warn, check)


@_local_errors
def latest(
    repo: str,
    *,
    revision: str | None = None,
    require: bool = False,
    verify_key: PathLike | None = None,
    verify_certificate_chain: PathLike | None = None,
    verify_identity: str | None = None,
    verify_issuer: str | None = None,
    sigstore_trust_config: PathLike | None = None,
    verify_min_step: int | None = None,
    verify_require_provenance: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle | None:
    """The highest complete ``checkpoint-N`` of ``repo``, pinned to the SHA it was read at.

    None only when there is no complete checkpoint: the repo or its branch does not exist
    yet, or holds none. Any failure to tell (401, 5xx after retries, a timeout, an unknown
    ``revision``) raises. ``require=True`` raises
    :class:`~ckpt_action.errors.NoCheckpointError` instead of returning None. With
    ``verify_key=`` (or ``verify_certificate_chain=``, ``verify_identity=``/``verify_issuer=``)
    a folder whose signature does not verify is passed over (a warning names it);
    ``verify_min_step=`` refuses (raises) when the newest that verifies has a lower step.

    >>> ckpt.latest("org/run")  # doctest: +ELLIPSIS
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='...', step=300, endpoint='http://127.0.0.1:...')
    """
    res = find_latest(repo, revision=revision, verify_key=verify_key, verify_certificate_chain=verify_certificate_chain,
                      verify_identity=verify_identity, verify_issuer=verify_issuer,
                      sigstore_trust_config=sigstore_trust_config, verify_min_step=verify_min_step,
                      verify_require_provenance=verify_require_provenance, endpoint=endpoint, token=token,
                      timeout=timeout, retries=retries)
    if res.handle is None and require:
        raise no_checkpoint(repo)
    return res.handle


def one_source_error() -> InputError:
    """The error for a pull naming its checkpoint more than once (or, on the command line, not at all)."""
    return InputError(f"pull needs exactly one of {param('subfolder')}, {param('latest')}, {param('pointer')} or"
                      f" {param('from_wandb')}")


def _pointed(pointer: PathLike | Mapping[str, Any] | None, from_wandb: str | None,
             settings: Settings) -> CheckpointHandle:
    from ckpt_action.wandb import format as pointer_format

    if from_wandb is not None:
        from ckpt_action.wandb import sdk

        return sdk.fetch_pointer(str(from_wandb), timeout=settings.timeout, max_bytes=settings.max_pointer_bytes,
                                 before_request=_first_request)
    if isinstance(pointer, Mapping):
        return pointer_format.parse_pointer(dict(pointer))
    assert pointer is not None
    return pointer_format.read_pointer(pointer, max_bytes=settings.max_pointer_bytes)


def pull_checkpoint(
    source: CheckpointHandle | str | None = None,
    local_dir: PathLike | None = None,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    latest: bool = False,
    pointer: PathLike | Mapping[str, Any] | None = None,
    from_wandb: str | None = None,
    force: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    cache_dir: PathLike | None = None,
    verify_key: PathLike | None = None,
    verify_certificate_chain: PathLike | None = None,
    verify_identity: str | None = None,
    verify_issuer: str | None = None,
    sigstore_trust_config: PathLike | None = None,
    verify_min_step: int | None = None,
    verify_require_provenance: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    warn: Warn | None = None,
    found: LatestResult | None = None,
) -> PullResult:
    """:func:`pull`, answering the full :class:`~ckpt_action.ops.pull.PullResult` (the
    handle, files and bytes, what was downloaded, reused, filled from the cache, removed, and
    what the signature check found).

    ``found``: the :func:`find_latest` result whose handle ``source`` is: what it read of
    that folder (its manifest, its listing) is not read again. Its signature check is
    not taken over: ``verify_*`` given here are checked here."""
    from ckpt_action.disk.cache import CacheConfig
    from ckpt_action.ops.pull import Selection
    from ckpt_action.ops.pull import pull as core_pull

    by_pointer = pointer is not None or from_wandb is not None
    named = [n for n, given in (("subfolder", subfolder is not None), ("latest", latest),
                                ("pointer", pointer is not None), ("from_wandb", from_wandb is not None)) if given]
    if len(named) > 1:
        raise one_source_error()
    if by_pointer and isinstance(source, CheckpointHandle):
        raise InputError(f"a handle does not go with {param(named[0])}: the handle pins the checkpoint already",
                         param=named[0])
    looked = check_target(os.fspath(local_dir) if local_dir is not None else "", force=force)
    target = looked.path
    cache = CacheConfig.from_options(os.fspath(cache_dir) if cache_dir is not None else None, target)
    select = Selection.from_options(tuple(include), tuple(exclude))
    check = verifier(verify_key=verify_key, verify_certificate_chain=verify_certificate_chain,
                     verify_identity=verify_identity, verify_issuer=verify_issuer,
                     sigstore_trust_config=sigstore_trust_config, verify_min_step=verify_min_step,
                     verify_require_provenance=verify_require_provenance)
    sha: str | None = None
    if by_pointer:
        if revision:
            raise InputError(f"{param('revision')} does not go with a pointer: the pointer pins the SHA",
                             param="revision")
        settings = _settings(endpoint, token, timeout, retries)
        pointed = _pointed(pointer, from_wandb, settings)
        names.check_origin(pointed.endpoint, settings.endpoint, what="the pointer")
        if source is not None and names.repo_id(str(source)) != pointed.repo:
            raise InputError(f"{param('repo')} {source} disagrees with the pointer's repo {pointed.repo}: drop"
                             f" {param('repo')}", param="repo")
        repo, rev, sha = pointed.repo, None, pointed.revision
        sub_or_latest: str | None = pointed.subfolder
    else:
        if source is None:
            source = names.repo_id(None)
        repo, sub_or_latest, rev = _source(source, subfolder, revision)
        settings = _settings_for(source, endpoint, token, timeout, retries)
        if isinstance(source, CheckpointHandle):
            sha = source.revision
        elif rev is not None and SHA_RE.match(rev):
            sha = rev
    remote = _remote(settings, repo)
    sub = sub_or_latest
    # What latest read of the folder it chose goes down to the pull, which does not read it
    # again; its signature check too, when made here with this very verifier.
    chosen = found.chosen if found is not None and found.handle == source else None
    if chosen is not None:
        chosen = dataclasses.replace(chosen, signature=None, verifier=None)
    if sub is None:
        res = _latest(remote, rev, warn, check)
        if res.handle is None:
            raise no_checkpoint(repo, " to pull")
        sub, sha, chosen = res.handle.subfolder, res.handle.revision, res.chosen
    return core_pull(remote, sub, rev, target, force=force, sha=sha, select=select, cache=cache, verifier=check,
                     chosen=chosen, looked=looked)


@_local_errors
def pull(
    source: CheckpointHandle | str | None = None,
    local_dir: PathLike | None = None,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    force: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    cache_dir: PathLike | None = None,
    pointer: PathLike | Mapping[str, Any] | None = None,
    from_wandb: str | None = None,
    verify_key: PathLike | None = None,
    verify_certificate_chain: PathLike | None = None,
    verify_identity: str | None = None,
    verify_issuer: str | None = None,
    sigstore_trust_config: PathLike | None = None,
    verify_min_step: int | None = None,
    verify_require_provenance: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    found: LatestResult | None = None,
) -> Path:
    """Download a checkpoint into ``local_dir`` (its files, not a nested folder) and return the path.

    ``source`` is a handle (from :func:`push` or :func:`latest`: exactly that folder at that
    SHA) or a repo id with ``subfolder`` and ``revision`` (a SHA, branch or tag; default
    main's head). A repo id without ``subfolder`` pulls the latest complete checkpoint
    (:class:`~ckpt_action.errors.NoCheckpointError` when there is none). Instead of a
    source, ``pointer`` (a ``checkpoint.json`` path, its dir, or its dict) or
    ``from_wandb`` (``ENTITY/PROJECT/NAME:ALIAS``) names the checkpoint; the Hub it names
    must be the configured endpoint, as must a handle's. Every file is verified before
    ``local_dir`` appears; a failure leaves it as it was. A ``local_dir`` holding an earlier
    pull is updated in place (only what changed is downloaded); ``force=True`` overwrites
    files of that pull edited since; a file the earlier pull did not write is never deleted
    (such a dir is refused, force or not). ``include``/``exclude`` glob patterns pull part
    of the checkpoint; ``cache_dir`` (else ``CKPT_CACHE_DIR``) keeps verified files across
    pulls. ``verify_key=`` (or ``verify_certificate_chain=``, ``verify_identity=``/
    ``verify_issuer=``) also checks ``model.sig`` against the manifest before any download
    and every byte after, before ``local_dir`` changes:
    :class:`~ckpt_action.checkpoint.signing.SignatureError` names what failed.
    ``verify_min_step=N`` also refuses a signed step below N (a signed older checkpoint
    put back verifies: a signature does not prove it is the newest), and
    ``verify_require_provenance=True`` a folder without a signed ``ckpt-provenance.json``.
    ``found``, the :func:`find_latest` result whose handle ``source`` is, saves reading
    again what it read of that folder.

    >>> ckpt.pull(found, "resume/") == scratch / "resume"
    True
    >>> sorted(p.name for p in (scratch / "resume").iterdir())
    ['.ckpt-pull.json', 'ckpt-manifest.json', 'config.json', 'model.safetensors']
    >>> ckpt.pull("org/run", "copy-200/", subfolder="checkpoint-200", revision=sha).name
    'copy-200'
    """
    return pull_checkpoint(source, local_dir, subfolder=subfolder, revision=revision, pointer=pointer,
                           from_wandb=from_wandb, force=force, include=include, exclude=exclude,
                           cache_dir=cache_dir, verify_key=verify_key,
                           verify_certificate_chain=verify_certificate_chain, verify_identity=verify_identity,
                           verify_issuer=verify_issuer, sigstore_trust_config=sigstore_trust_config,
                           verify_min_step=verify_min_step, verify_require_provenance=verify_require_provenance,
                           endpoint=endpoint, token=token, timeout=timeout, retries=retries,
                           found=found).local_dir


# --------------------------------------------------------------------------- W&B


def pulled_checkpoint(local_dir: PathLike) -> tuple[str, str, str] | None:
    """(repo, subfolder, revision) of the checkpoint a pull left in ``local_dir`` (its
    record, ``.ckpt-pull.json``), or None when there is none or it cannot be trusted.

    After a pull into ``resume/checkpoint-300`` (not run here: it needs a pulled dir)::

        ckpt.api.pulled_checkpoint("resume/checkpoint-300")
        # -> ('org/run', 'checkpoint-300', '3f1c…')
    """
    from ckpt_action.disk.target import read_record

    record = read_record(Path(os.fspath(local_dir)))
    if record is None:
        return None
    pinned = BUCKET_PIN_RE if names.bucket(record.repo) is not None else SHA_RE  # a bucket: the manifest's sha256
    if not pinned.fullmatch(record.revision):
        return None
    return record.repo, record.subfolder, record.revision


@_local_errors
def log_pointer(
    handle: CheckpointHandle,
    run: Any = None,
    *,
    artifact_name: str | None = None,
    extra: dict[str, Any] | None = None,
    project: str | None = None,
    entity: str | None = None,
    run_id: str | None = None,
    registry: str | None = None,
    warn: Warn | None = None,
) -> PointerResult:
    """Log a W&B ``model-pointer`` artifact for ``handle`` (aliases ``latest`` and ``step-N``).

    It goes to ``run``, else to the run active in this process (``wandb.run``); neither is
    finished here. With no run at all, ``project`` (default ``WANDB_PROJECT``) logs it from
    a short run of its own (attached to the run ``run_id`` when given); without one either,
    it raises :class:`~ckpt_action.wandb.sdk.WandbError`, as it does for any W&B
    failure. ``registry`` (``wandb-registry-NAME/COLLECTION``) also links the pointer
    there; a failed link only warns (``warn``, default the ``ckpt_action`` logger), since
    the pointer is logged.

    With a run (W&B needs its own service process, so this example is not run here)::

        run = wandb.init(project="llama-sft")
        ckpt.log_pointer(h).aliases  # ('latest', 'step-300')
    """
    check_wandb_inputs(project=project, entity=entity, run_id=run_id, artifact_name=artifact_name,
                       registry=registry)
    from ckpt_action.errors import CkptError
    from ckpt_action.wandb import sdk as wandb_pointer

    if run is None and run_id is None:
        run = wandb_pointer.active_run()
    if run is None:
        project = project or os.environ.get("WANDB_PROJECT")
        if not project:
            raise wandb_pointer.WandbError(
                "no active W&B run: call wandb.init() first, pass run=, or give project= (or WANDB_PROJECT)")
        result = wandb_pointer.log_pointer(handle, project=project, entity=entity or os.environ.get("WANDB_ENTITY"),
                                           run_id=run_id, artifact_name=artifact_name, extra=extra)
    else:
        result = wandb_pointer.log_pointer_to_run(handle, run, artifact_name=artifact_name, extra=extra)
    if registry:
        try:
            ref = f"{result.entity}/{result.project}/{result.artifact_name}:latest"
            wandb_pointer.link_to_registry(ref, registry, project=result.project, entity=result.entity)
        except CkptError as exc:
            _warn(warn)(f"the pointer is logged, but linking it into {registry} failed: {exc}")
    return result


def check_wandb_inputs(*, project: str | None = None, entity: str | None = None, run_id: str | None = None,
                       artifact_name: str | None = None, registry: str | None = None,
                       prefix: str = "") -> None:
    """Refuse bad W&B inputs (InputError naming the one to change) before any request; the
    CLI calls this before a push or promote starts (its parameters are ``prefix="wandb_"``:
    ``--wandb-project``), ``log_pointer`` before W&B is imported."""
    from ckpt_action.wandb.format import check_inputs

    check_inputs(project=project, entity=entity, run_id=run_id, artifact_name=artifact_name, registry=registry,
                 prefix=prefix)


def active_wandb_run() -> Any:
    """The W&B run active in this process, or None (a disabled run counts as none); W&B is
    imported only if it already is."""
    from ckpt_action.wandb import sdk as wandb_pointer

    return wandb_pointer.active_run()


# --------------------------------------------------------------------------- promote, list, prune


def promote_checkpoint(
    source: CheckpointHandle | str,
    to: str,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    to_repo: str | None = None,
    tag: str | None = None,
    branch: str | None = None,
    signing_key: PathLike | None = None,
    signing_certificate: PathLike | None = None,
    signing_chain: PathLike | Sequence[PathLike] | None = None,
    sign_keyless: bool = False,
    sigstore_trust_config: PathLike | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> PromoteResult:
    """:func:`promote`, answering the full :class:`~ckpt_action.ops.release.PromoteResult`
    (the target's handle, the source, commits made, the tag and branch, who signed)."""
    from ckpt_action.ops.release import promote as core_promote

    repo, sub, rev = _source(source, subfolder, revision)
    if sub is None:
        raise InputError(f"promote needs {param('subfolder')} (or a handle): name the checkpoint to promote",
                         param="subfolder")
    to = names.subfolder(to, name="to")
    tag = names.revision(tag or None, name="tag")
    branch = names.revision(branch or None, name="branch")
    target_repo = names.repo_id(to_repo, "to_repo") if to_repo else None
    if target_repo and branch:
        raise InputError(f"{param('branch')} does not go with {param('to_repo')}: promote into the other repo's main",
                         param="branch")
    if (tag or branch) and not target_repo and names.bucket(repo) is not None:
        raise InputError(f"{param('tag' if tag else 'branch')}: a bucket has no tags or branches; promote into a model"
                         f" repo with {param('to_repo')} to tag the release", param="tag" if tag else "branch")
    settings = _settings_for(source, endpoint, token, timeout, retries)
    names.token_for_write(settings.token, settings.endpoint)
    sign = signer(signing_key=signing_key, signing_certificate=signing_certificate, signing_chain=signing_chain,
                  sign_keyless=sign_keyless, sigstore_trust_config=sigstore_trust_config)
    remote = _remote(settings, repo)
    target = _remote(settings, target_repo, api=remote.api) if target_repo else None
    return core_promote(remote, sub, rev, to, tag=tag, branch=branch, target=target, signer=sign)


@_local_errors
def promote(
    source: CheckpointHandle | str,
    to: str,
    *,
    subfolder: str | None = None,
    revision: str | None = None,
    to_repo: str | None = None,
    tag: str | None = None,
    branch: str | None = None,
    signing_key: PathLike | None = None,
    signing_certificate: PathLike | None = None,
    signing_chain: PathLike | Sequence[PathLike] | None = None,
    sign_keyless: bool = False,
    sigstore_trust_config: PathLike | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> CheckpointHandle:
    """Copy a checkpoint to the folder ``to`` (``release``) in one commit, and return the target's handle.

    The signing keywords are :func:`push`'s: the target gets its own ``model.sig`` and
    provenance statement (the source's are never copied).

    In the same repo the Hub copies the files server-side (no bytes move); with
    ``to_repo`` they stream through this machine, verified. ``tag`` tags the resulting
    commit (a tag pointing elsewhere raises :class:`~ckpt_action.errors.ConflictError`);
    ``branch`` commits on that branch, created from the source SHA. Re-running is a no-op.

    >>> ckpt.promote(found, "release", tag="v1.0")  # doctest: +ELLIPSIS
    CheckpointHandle(repo='org/run', subfolder='release', revision='...', step=300, endpoint='http://127.0.0.1:...')
    """
    return promote_checkpoint(source, to, subfolder=subfolder, revision=revision, to_repo=to_repo, tag=tag,
                              branch=branch, signing_key=signing_key, signing_certificate=signing_certificate,
                              signing_chain=signing_chain, sign_keyless=sign_keyless,
                              sigstore_trust_config=sigstore_trust_config, endpoint=endpoint, token=token,
                              timeout=timeout, retries=retries).handle


def list_repo(
    repo: str,
    *,
    revision: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    warn: Warn | None = None,
) -> ListResult:
    """:func:`list_checkpoints`, answering the SHA read with the checkpoints (:class:`ListResult`)."""
    from ckpt_action.ops.discover import list_checkpoints as core_list

    repo = names.repo_id(repo)
    revision = names.revision(revision)
    remote = _remote(_settings(endpoint, token, timeout, retries), repo)
    try:
        remote.resolve(revision)
    except NotFoundError:
        if revision is not None:
            raise
        _warn(warn)(missing_repo(repo, "checkpoints"))
        return ListResult(repo, None, [])
    sha, infos = core_list(remote, revision)
    return ListResult(repo, sha, infos)


@_local_errors
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
    and the ``revision`` it was read at. A ``foreign`` ``checkpoint-N`` (no manifest) is
    complete only where no ``checkpoint-N`` of the repo has a manifest (``problem`` says why).
    A repo that does not exist has none (a warning says so); any other failure raises.

    >>> [(i.subfolder, i.status) for i in ckpt.list_checkpoints("org/run")]
    [('checkpoint-300', 'complete'), ('checkpoint-200', 'complete')]
    """
    return list_repo(repo, revision=revision, endpoint=endpoint, token=token, timeout=timeout,
                     retries=retries).checkpoints


@_local_errors
def prune(
    repo: str,
    keep_last: int,
    *,
    dry_run: bool = False,
    free_storage: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> PruneResult:
    """Delete all but the newest ``keep_last`` ``checkpoint-N`` folders, in one commit.

    Never deleted: the latest complete checkpoint, folders not named ``checkpoint-N``
    (``sft``, ``release``), the source of a promoted folder, a checkpoint a tag was made
    for. ``dry_run=True`` only reports.

    ``free_storage=True`` also frees the Hub storage only the pruned folders held: the LFS
    objects no other path names in any commit of any branch or tag are permanently
    deleted, without rewriting history (no SHA changes; see :mod:`ckpt_action.ops.freeing`).
    Their old SHAs then fail to pull, saying their files were deleted to free storage.

    >>> ckpt.prune("org/run", keep_last=1, dry_run=True).deleted
    ['checkpoint-200']
    """
    from ckpt_action.ops.release import prune as core_prune

    repo = names.repo_id(repo)
    keep = names.positive(keep_last, "keep_last")
    if keep is None:
        raise InputError(f"{param('keep_last')} is required: how many of the newest checkpoint-N to keep",
                         param="keep_last")
    settings = _settings(endpoint, token, timeout, retries)
    if not dry_run:
        names.token_for_write(settings.token, settings.endpoint)
    remote = _remote(settings, repo)
    from ckpt_action.stores import BucketStore

    if isinstance(remote, BucketStore):  # a bucket's deletes free its storage at once: its usage before and after
        before = remote.usage()
        plan, _pin = core_prune(remote, keep, dry_run=dry_run)
        after = before if dry_run else remote.usage()
        return PruneResult(None, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                           repo, True, before - after if before is not None and after is not None else None, None,
                           before, after)
    if not free_storage:
        plan, sha = core_prune(remote, keep, dry_run=dry_run)
        return PruneResult(sha, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                           repo)
    from ckpt_action.ops.freeing import free_pruned, read_references, used_storage

    # Read before the prune's commit: the Hub's figure (that commit itself frees nothing), and
    # the history, so a repo too long to read is refused before anything is written.
    before = used_storage(remote)
    history = read_references(remote)
    plan, sha = core_prune(remote, keep, dry_run=dry_run)
    freed = free_pruned(remote, plan.delete, history, head=sha, used_before=before, dry_run=dry_run)
    return PruneResult(sha, list(plan.delete), {name: plan.reasons.get(name, "") for name in plan.keep}, dry_run,
                       repo, True, freed.freed_bytes, freed.objects, freed.used_before, freed.used_after)
