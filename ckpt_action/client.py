"""The client: every command's steps, once, as methods of one object holding the connection.

``Client(endpoint=..., token=..., timeout=..., retries=...)`` is given where the Hub is
once (the shape of huggingface_hub's ``HfApi``); each command is a method answering its
full result (:meth:`Client.push` a :class:`~ckpt_action.ops.push.PushResult`,
:meth:`Client.latest` a :class:`~ckpt_action.ops.discover.LatestResult`, ...). Each runs as
check inputs -> settings -> repo -> operation -> result; the options several commands take
are the typed groups of :mod:`ckpt_action.options` (:class:`~ckpt_action.options.Signing`,
:class:`~ckpt_action.options.Verification`). Both doors call these methods: the CLI with
what it parsed, ``ckpt.push``/``ckpt.pull``/... (:mod:`ckpt_action.api`) with their keywords.

Errors leave a method through one boundary (:func:`ckpt_action.boundary.boundary`): our own
as they are, a local I/O failure as :class:`~ckpt_action.errors.LocalIOError` naming the
path and the parameter it is under, which each door spells (``local_dir=``,
``--local-dir``). Nothing global changes: the environment is read when a command runs, and
the clients come from huggingface_hub's factory (``huggingface_hub.set_client_factory``),
never replaced.

A little under 500 lines on purpose: one method per command, each its command's checks in
order before its first request, which read best side by side (the steps after the first
request are the operations', in ``ops/``).

>>> import tempfile
>>> from pathlib import Path
>>> from ckpt_localhub import LocalHub
>>> work = Path(tempfile.mkdtemp())
>>> _ = (work / "out").mkdir()
>>> _ = (work / "out" / "model.safetensors").write_bytes(b"weights")
>>> with LocalHub(work / "hub") as hub:
...     client = Client(endpoint=hub.url, retries=2)
...     pushed = client.push(work / "out", "org/run", step=7)
...     found = client.latest("org/run")
...     pulled = client.pull(found.handle, work / "resume", found=found)
>>> (pushed.uploaded_files, found.handle == pushed.handle, pulled.downloaded_files)
(1, True, 1)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_action import names
from ckpt_action.boundary import boundary, first_request
from ckpt_action.errors import InputError, param, render
from ckpt_action.handle import BUCKET_PIN_RE, SHA_RE, CheckpointHandle
from ckpt_action.options import Connection, PathLike, Retention, Signing, Verification
from ckpt_action.settings import Settings

if TYPE_CHECKING:
    from ckpt_action.checkpoint.metrics import Objective
    from ckpt_action.checkpoint.signing import LoadedSigner
    from ckpt_action.checkpoint.verifying import Verifier
    from ckpt_action.ops.discover import LatestResult
    from ckpt_action.ops.prune import ListResult, PruneResult
    from ckpt_action.ops.pull import PullResult
    from ckpt_action.ops.push import PushResult
    from ckpt_action.ops.release import PromoteResult
    from ckpt_action.stores.base import Store
    from ckpt_action.wandb.sdk import PointerResult

log = logging.getLogger("ckpt_action")

# The results, for the doors and the integrations (which render or pass them on without
# importing the operations): resolved on first use, like the package's own names.
_RESULTS = {
    "PushResult": "ckpt_action.ops.push",
    "PullResult": "ckpt_action.ops.pull",
    "LatestResult": "ckpt_action.ops.discover",
    "CheckpointInfo": "ckpt_action.ops.discover",
    "PromoteResult": "ckpt_action.ops.release",
    "ListResult": "ckpt_action.ops.prune",
    "PruneResult": "ckpt_action.ops.prune",
    "PointerResult": "ckpt_action.wandb.sdk",
}


def __getattr__(name: str) -> Any:
    if name in _RESULTS:
        from importlib import import_module

        return getattr(import_module(_RESULTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


Warn = Callable[[str], None]


# --------------------------------------------------------------------------- the option groups, loaded


def signer(signing: Signing | None) -> LoadedSigner | None:
    """The signer push and promote sign with (None: unsigned), checked and loaded before any
    request: the key read (its password only from ``CKPT_SIGNING_KEY_PASSWORD``), the
    certificate matched to it, or for keyless signing the ambient GitHub Actions OIDC token
    found (the workflow needs ``permissions: id-token: write``). Messages name the options
    as parameter references, which each door spells (``--signing-key``, ``signing_key=``)."""
    if signing is None or not signing.wanted:
        return None  # model_signing stays unimported
    from ckpt_action.checkpoint.signing import SigningConfig

    config = SigningConfig.from_options(signing_key=signing.signing_key,
                                        signing_certificate=signing.signing_certificate,
                                        signing_chain=signing.signing_chain, sign_keyless=signing.sign_keyless,
                                        trust_config=signing.sigstore_trust_config, names=param)
    return config.load(names=param) if config is not None else None


def verifier(verification: Verification | None) -> Verifier | None:
    """The check pull and latest apply to ``model.sig`` (None: none), loaded before any
    request: a public key, a CA certificate chain, or a Sigstore identity and issuer
    (``https://github.com/ORG/REPO`` alone accepts any workflow of that repo). A signature
    proves who signed which bytes for which repo, folder and step, not that they are the
    newest: ``verify_min_step`` refuses a signed step below it (a rollback),
    ``verify_require_provenance`` a folder without a signed provenance statement."""
    if verification is None or not verification.wanted:
        return None
    from ckpt_action.checkpoint.verifying import VerifyConfig

    v = verification
    config = VerifyConfig.from_options(verify_key=v.verify_key, verify_certificate_chain=v.verify_certificate_chain,
                                       verify_identity=v.verify_identity, verify_issuer=v.verify_issuer,
                                       trust_config=v.sigstore_trust_config, verify_min_step=v.verify_min_step,
                                       verify_require_provenance=v.verify_require_provenance, names=param)
    return config.load(names=param) if config is not None else None


# --------------------------------------------------------------------------- small shared steps


def _log_warning(message: str) -> None:
    """A warning as Python callers read it: its parameters spelled ``require=True``."""
    log.warning("%s", render(message, "api"))


def _log_note(message: str) -> None:
    log.info("%s", render(message, "api"))


def one_source_error() -> InputError:
    """The error for a pull naming its checkpoint more than once (or, on the command line, not at all)."""
    return InputError(f"pull needs exactly one of {param('subfolder')}, {param('latest')}, {param('pointer')} or"
                      f" {param('from_wandb')}")


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


def source_of(source: CheckpointHandle | str, subfolder: str | None,
              revision: str | None) -> tuple[str, str | None, str | None]:
    """(repo, subfolder, revision) from a handle or a repo id plus options.

    A handle pins everything; options may repeat it but not contradict it. Its endpoint is
    never adopted: the token goes only to the configured endpoint.
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


def check_wandb_inputs(*, project: str | None = None, entity: str | None = None, run_id: str | None = None,
                       artifact_name: str | None = None, registry: str | None = None,
                       prefix: str = "") -> None:
    """Refuse bad W&B inputs (InputError naming the one to change) before any request; the
    CLI calls this before a push or promote starts (its parameters are ``prefix="wandb_"``:
    ``--wandb-project``), ``log_pointer`` before W&B is imported."""
    from ckpt_action.wandb.format import check_inputs

    check_inputs(project=project, entity=entity, run_id=run_id, artifact_name=artifact_name, registry=registry,
                 prefix=prefix)


# --------------------------------------------------------------------------- the client


def metrics_from_text(items: Sequence[str], name: str = "metric") -> dict[str, float]:
    """``NAME=VALUE`` texts (``--metric``, the action's ``metrics`` lines) as the ``metrics``
    push records, checked; errors name the parameter ``name``."""
    from ckpt_action.checkpoint.metrics import parse_metrics

    return parse_metrics(items, name)


TRAINER_STATE_MAX_BYTES = 64 * 1024 * 1024
"""A ``trainer_state.json`` larger than this is not read for metrics."""


def trainer_metrics(checkpoint_dir: PathLike, step: int) -> dict[str, float]:
    """The evaluation metrics (``eval_*``) Trainer logged at ``step``, from the
    ``trainer_state.json`` in ``checkpoint_dir`` (its ``log_history``): what the Trainer
    callback records with each push. None there, or unreadable: none."""
    from ckpt_action.checkpoint.metrics import from_trainer_state

    path = Path(os.fspath(checkpoint_dir)) / "trainer_state.json"
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > TRAINER_STATE_MAX_BYTES:
            return {}
        return from_trainer_state(path.read_bytes(), step)
    except OSError:
        return {}


def objective(text: str | None, name: str, *, count: bool = False) -> Objective | None:
    """``METRIC:min|max`` (``[:K]`` with ``count``) for the parameter ``name``, checked; None when not given."""
    if text is None or text == "":
        return None
    from ckpt_action.checkpoint.metrics import parse_objective

    return parse_objective(text, name, count=count)


def retention_rules(retention: Retention) -> tuple[int | None, int | None, Objective | None]:
    """(keep_last, keep_every, keep_best) of ``retention``, checked before any request; none
    given is an InputError naming ``keep_last`` (what prune needs)."""
    keep = names.positive(retention.keep_last, "keep_last")
    every = names.positive(retention.keep_every, "keep_every")
    best = objective(retention.keep_best, "keep_best", count=True)
    if keep is None and every is None and best is None:
        raise InputError(f"{param('keep_last')} is required (or {param('keep_every')}, {param('keep_best')}): how"
                         " many of the newest checkpoint-N to keep", param="keep_last")
    return keep, every, best


def connection_of(client: Client | None, **given: Any) -> dict[str, Any]:
    """The connection keywords (``Connection``'s fields: ``endpoint``, ``token``, ...) of a
    watch or a callback: the ``client``'s when one is given, else the loose ``given`` ones.
    Both at once is an InputError naming them (the connection is given once)."""
    if client is None:
        return dict(given)
    loose = [name for name, value in given.items() if value is not None]
    if loose:
        raise InputError(f"{param('client')} does not go with {', '.join(param(n) for n in loose)}: give the"
                         " connection once, in the client", param="client")
    from dataclasses import asdict

    return asdict(client.connection)


def retention_of(retention: Retention | None, **given: Any) -> Retention:
    """The retention of a watch or a callback: the ``Retention`` group when given, else one made
    from the loose ``keep_last``/``keep_every``/``keep_best``; both is an InputError naming them."""
    if retention is None:
        return Retention(**given)
    loose = [name for name, value in given.items() if value is not None]
    if loose:
        raise InputError(f"{param('retention')} does not go with {', '.join(param(n) for n in loose)}: give the"
                         " rules once, in the retention", param="retention")
    return retention


def _refuse_card_on_bucket(card: bool, repo: str) -> None:
    """``card`` for a Storage Bucket: it has no model card, so refuse it before anything is sent."""
    if card and names.bucket(repo) is not None:
        raise InputError(f"{param('card')}: a bucket has no model card: use {param('card')} on the model repo, e.g."
                         f" promote {param('to_repo')} OWNER/NAME {param('card')}", param="card")


def _tags_of() -> Any:
    """The rule naming the tags made for each folder, for a push's card (prune's rule)."""
    from ckpt_action.ops.prune import tagged_folders

    return tagged_folders


class Client:
    """Every command, against one Hub: ``Client(endpoint=, token=, timeout=, retries=)``,
    each unset one read from the environment when a command runs (``HF_ENDPOINT``,
    ``HF_TOKEN`` or a token saved by ``hf auth login``, ``CKPT_TIMEOUT``,
    ``CKPT_RETRIES``). Each method answers its command's full result; warnings go to
    ``warn`` where a method takes one, else to the ``ckpt_action`` logger."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, timeout: float | None = None,
                 retries: int | None = None, auth: str | None = None) -> None:
        self.connection = Connection(endpoint, token or None, timeout, retries, auth or None)
        self._exchanges: dict[Any, Any] = {}
        """Keyless: the tokens exchanged for this client, by endpoint and repo (in memory only)."""

    def __repr__(self) -> str:
        return f"Client({self.connection.endpoint!r}, timeout={self.connection.timeout!r}, " \
               f"retries={self.connection.retries!r}, auth={self.connection.auth!r})"

    # ---- where the Hub is

    def settings(self) -> Settings:
        """This client's settings as they are now (the environment read for what it leaves unset)."""
        c = self.connection
        return Settings.from_env(endpoint=c.endpoint, token=c.token or None, timeout=c.timeout, retries=c.retries,
                                 auth=c.auth, exchanges=self._exchanges)

    def _settings_for(self, source: object) -> Settings:
        """Settings for reading ``source``: a handle naming another host than the configured
        endpoint is refused (the token goes only there), as the CLI refuses such a pointer."""
        settings = self.settings()
        if isinstance(source, CheckpointHandle):
            names.check_origin(source.endpoint, settings.endpoint)
        return settings

    @staticmethod
    def _store(settings: Settings, repo: str, api: Any = None, *, command: str = "this command",
               write: bool = False) -> Store:
        """The one store a command opens (a model repo or a bucket), handed to its operations
        as it is; ``api``: share another store's huggingface_hub client. Keyless, a token that
        cannot do what ``command`` does to ``repo`` (``write``) is refused here, before any upload."""
        first_request()
        from ckpt_action.stores import open_store

        return open_store(settings, repo, api=api, command=command, write=write)

    # ---- the commands

    @boundary("local_dir")
    def push(self, local_dir: PathLike, repo: str, *, step: int | None = None, subfolder: str | None = None,
             private: bool = True, commit_message: str | None = None, signing: Signing | None = None,
             distributed: bool = False, group: Any = None, join_job: bool = False,
             note: Warn | None = None, metrics: Mapping[str, float] | None = None,
             card: bool = False) -> PushResult:
        """Push ``local_dir`` to ``repo/<subfolder>/`` (see :func:`ckpt_action.api.push`),
        answering the handle, the commits made, the files uploaded and deleted, and who signed.

        ``join_job``: for a process started by torchrun that has not joined its job's process
        group (``ckpt-action push --distributed``): with ``distributed``, join it from
        ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (gloo) for the push and
        leave it after; without torch, an InputError naming the ``[distributed]`` extra.
        ``note``: where the one line naming the tool's files left out of the push goes
        (:func:`left_out_note`); default the ``ckpt_action`` logger, at INFO.
        ``metrics``: what the checkpoint scored, recorded in its manifest (names and values
        checked). ``card``: the last commit also updates the table of checkpoints in the
        repo's ``README.md``.
        """
        from ckpt_action.checkpoint.metrics import check_metrics
        from ckpt_action.disk.source import local_dir_to_push, tool_files
        from ckpt_action.ops.push import push as push_folder

        repo = names.repo_id(repo)
        subfolder, step = names.push_target(subfolder, step)
        scores = check_metrics(metrics, "metrics") if metrics is not None else None
        _refuse_card_on_bucket(card, repo)
        if card and distributed:
            raise InputError(f"{param('card')} does not go with {param('distributed')} yet: update the card with a"
                             " prune or promote", param="card")
        if group is not None and not distributed:
            raise InputError(f"{param('group')} goes with {param('distributed')}True: add it, or drop"
                             f" {param('group')}", param="group")
        # With distributed each rank checks its own dir inside the push, so that a bad one
        # fails every rank at once.
        path = None if distributed else local_dir_to_push(os.fspath(local_dir))
        if commit_message is not None:
            commit_message = names.commit_message(commit_message)
        settings = self.settings()
        names.token_for_write(settings.token or settings.auth == "oidc", settings.endpoint)
        sign = signer(signing)
        if path is not None:
            from ckpt_action.checkpoint.sealing import refuse_written_folders

            refuse_written_folders(path, signed=sign is not None)
        remote = self._store(settings, repo, command="push", write=True)
        if distributed:
            if sign is not None:
                raise InputError(f"{param('distributed')} does not sign yet: sign with a promote of the pushed"
                                 f" checkpoint, or drop {param('signing_key')}/{param('sign_keyless')}",
                                 param="distributed")
            from ckpt_action.ops.rankpush import joined_job, push_on_ranks

            with joined_job(settings.distributed_timeout) if join_job else nullcontext():
                res = push_on_ranks(remote, os.fspath(local_dir), subfolder, step=step, private=private,
                                    commit_message=commit_message, group=group, metrics=scores)
            if res is not None:
                return res
            path = local_dir_to_push(os.fspath(local_dir))  # in no process group: a push alone
        assert path is not None
        left_out = tool_files(path)
        res = push_folder(remote, path, subfolder, step=step, private=private, commit_message=commit_message,
                          signer=sign, metrics=scores, card=card, card_tags=_tags_of() if card else None)
        if not left_out:
            return res
        res = replace(res, left_out=left_out)
        (note or _log_note)(left_out_note(res))
        return res

    @boundary()
    def latest(self, repo: str, *, revision: str | None = None, require: bool = False,
               verification: Verification | None = None, warn: Warn | None = None,
               best: str | None = None) -> LatestResult:
        """The highest complete ``checkpoint-N`` of ``repo`` (see :func:`ckpt_action.api.latest`),
        answering the handle or None, the SHA read, whether it has a manifest and what was
        skipped. ``require=True``: none raises :class:`~ckpt_action.errors.NoCheckpointError`
        (its ``found`` is this result, for a door that reports it before failing). The handle
        carries what was read of its folder to a :meth:`pull` of it, which does not read it
        again. ``best="eval_loss:min"`` (``METRIC:min|max``): the complete checkpoint best by
        that metric of its manifest instead of the highest (one without it is never taken);
        ``chosen_by`` says which metric and value chose."""
        from ckpt_action.ops.choose import carry, choose_latest

        repo = names.repo_id(repo)
        revision = names.revision(revision)
        goal = objective(best, "best")
        check = verifier(verification)
        return carry(choose_latest(self._store(self.settings(), repo, command="latest"), revision, warn or _log_warning,
                                   check, require=require, best=goal), verification)

    @boundary("local_dir", "cache_dir")
    def pull(self, source: CheckpointHandle | str | None = None, local_dir: PathLike | None = None, *,
             subfolder: str | None = None, revision: str | None = None, latest: bool = False,
             pointer: PathLike | Mapping[str, Any] | None = None, from_wandb: str | None = None,
             force: bool = False, include: Sequence[str] = (), exclude: Sequence[str] = (),
             cache_dir: PathLike | None = None, verification: Verification | None = None,
             warn: Warn | None = None, found: LatestResult | None = None) -> PullResult:
        """Download a checkpoint into ``local_dir`` (see :func:`ckpt_action.api.pull`),
        answering the handle, files and bytes, what was downloaded, reused, filled from the
        cache, removed, and what the signature check found.

        ``latest=True`` pulls the latest complete checkpoint of the repo ``source``: its
        manifest is read once, and its signature checked once. ``found``: the :meth:`latest`
        result whose handle ``source`` is: what it read of that folder (its manifest, its
        listing) is not read again; its signature check is not taken over: ``verification``
        given here is checked here."""
        from ckpt_action.disk.cache import CacheConfig
        from ckpt_action.disk.target import check_target
        from ckpt_action.ops.choose import carried, carried_check, for_pull
        from ckpt_action.ops.pull import Selection
        from ckpt_action.ops.pull import pull as pull_folder

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
        check = verifier(verification)
        sha: str | None = None
        if by_pointer:
            if revision:
                raise InputError(f"{param('revision')} does not go with a pointer: the pointer pins the SHA",
                                 param="revision")
            settings = self.settings()
            pointed = self._pointed(pointer, from_wandb, settings)
            names.check_origin(pointed.endpoint, settings.endpoint, what="the pointer")
            if source is not None and names.repo_id(str(source)) != pointed.repo:
                raise InputError(f"{param('repo')} {source} disagrees with the pointer's repo {pointed.repo}: drop"
                                 f" {param('repo')}", param="repo")
            repo, rev, sha = pointed.repo, None, pointed.revision
            sub: str | None = pointed.subfolder
        else:
            if source is None:
                source = names.repo_id(None)
            repo, sub, rev = source_of(source, subfolder, revision)
            settings = self._settings_for(source)
            if isinstance(source, CheckpointHandle):
                sha = source.revision
            elif rev is not None and SHA_RE.match(rev):
                sha = rev
        remote = self._store(settings, repo, command="pull")
        checked = None
        if found is None:  # what latest read, carried by its handle; its check too when the same is asked
            found, checked = carried(source), carried_check(source, verification)
            check = checked or check
        sub, sha, chosen = for_pull(remote, sub, rev, sha, warn or _log_warning, check, source=source, found=found,
                                    checked=checked is not None)
        return pull_folder(remote, sub, rev, target, force=force, sha=sha, select=select, cache=cache,
                           verifier=check, chosen=chosen, looked=looked)

    @staticmethod
    def _pointed(pointer: PathLike | Mapping[str, Any] | None, from_wandb: str | None,
                 settings: Settings) -> CheckpointHandle:
        from ckpt_action.wandb import format as pointer_format

        if from_wandb is not None:
            from ckpt_action.wandb import sdk

            return sdk.fetch_pointer(str(from_wandb), timeout=settings.timeout, max_bytes=settings.max_pointer_bytes,
                                     before_request=first_request)
        if isinstance(pointer, Mapping):
            return pointer_format.parse_pointer(dict(pointer))
        assert pointer is not None
        return pointer_format.read_pointer(pointer, max_bytes=settings.max_pointer_bytes)

    @boundary()
    def promote(self, source: CheckpointHandle | str, to: str, *, subfolder: str | None = None,
                revision: str | None = None, to_repo: str | None = None, tag: str | None = None,
                branch: str | None = None, signing: Signing | None = None, best: str | None = None,
                card: bool = False, warn: Warn | None = None, as_model: bool = False,
                max_shard_size: int | str | None = None, strip_prefix: str | None = None) -> PromoteResult:
        """Copy a checkpoint to the folder ``to`` in one commit (see :func:`ckpt_action.api.promote`),
        answering the target's handle, the source, commits made, the tag and branch, who signed,
        and with ``best`` (``METRIC:min|max``, no ``subfolder``) the metric and value that chose
        the source (:meth:`latest`'s choice). ``card``: the same commit updates the table of
        checkpoints in ``README.md``. ``as_model``: the target is a folder ``from_pretrained``
        loads (:mod:`ckpt_action.ops.asmodel`), its converted weights sharded at ``max_shard_size``
        (bytes, or ``"5GB"``) with ``strip_prefix`` taken off their names."""
        from ckpt_action.ops import asmodel
        from ckpt_action.ops.release import promote

        repo, sub, rev = source_of(source, subfolder, revision)
        goal = objective(best, "best")
        if goal is not None and (sub is not None or isinstance(source, CheckpointHandle)):
            raise InputError(f"{param('best')} chooses the checkpoint: drop {param('subfolder')} (or the handle)",
                             param="best")
        if sub is None and goal is None:
            raise InputError(f"promote needs {param('subfolder')} (or a handle, or {param('best')}): name the"
                             " checkpoint to promote", param="subfolder")
        to = names.subfolder(to, name="to")
        if not as_model:
            for name, value in (("max_shard_size", max_shard_size), ("strip_prefix", strip_prefix)):
                if value not in (None, ""):
                    raise InputError(f"{param(name)} goes with {param('as_model')}: add it, or drop {param(name)}",
                                     param=name)
        shard = asmodel.shard_size(max_shard_size or None)
        if strip_prefix is not None and (not strip_prefix or len(strip_prefix) > 200 or not strip_prefix.isprintable()):
            raise InputError(f"{param('strip_prefix')} must be a printable name prefix such as model.",
                             param="strip_prefix")
        model: dict[str, Any] = {"as_model": as_model, "max_shard_size": shard, "strip_prefix": strip_prefix or None}
        tag = names.revision(tag or None, name="tag")
        branch = names.revision(branch or None, name="branch")
        target_repo = names.repo_id(to_repo, "to_repo") if to_repo else None
        _refuse_card_on_bucket(card, target_repo or repo)
        if target_repo and branch:
            raise InputError(f"{param('branch')} does not go with {param('to_repo')}: promote into the other repo's"
                             " main", param="branch")
        if (tag or branch) and not target_repo and names.bucket(repo) is not None:
            which = "tag" if tag else "branch"
            raise InputError(f"{param(which)}: a bucket has no tags or branches; promote into a model repo with"
                             f" {param('to_repo')} to tag the release", param=which)
        settings = self._settings_for(source)
        names.token_for_write(settings.token or settings.auth == "oidc", settings.endpoint)
        sign = signer(signing)
        remote = self._store(settings, repo, command="promote", write=not target_repo)
        target = self._store(settings, target_repo, api=getattr(remote, "api", None), command="promote",
                             write=True) if target_repo else None  # keyless: its own exchange (open_store)
        if goal is None:
            assert sub is not None
            return promote(remote, sub, rev, to, tag=tag, branch=branch, target=target, signer=sign, card=card,
                           **model)
        from ckpt_action.ops.choose import choose_latest

        found = choose_latest(remote, rev, warn or _log_warning, best=goal, require=True,
                       purpose=f" recording {goal.metric} to promote")
        assert found.handle is not None
        res = promote(remote, found.handle.subfolder, found.handle.revision, to, tag=tag, branch=branch,
                      target=target, signer=sign, card=card, **model)
        return replace(res, chosen_by=found.chosen_by)

    @boundary()
    def prune(self, repo: str, keep_last: int | None = None, *, dry_run: bool = False, free_storage: bool = False,
              retention: Retention | None = None, card: bool = False) -> PruneResult:
        """Delete all but the newest ``keep_last`` ``checkpoint-N`` folders in one commit, and
        with ``free_storage`` the storage only they held (see :func:`ckpt_action.api.prune`).
        ``retention``: the rules whose union is kept (a :class:`~ckpt_action.options.Retention`
        of keep-last, keep-every, keep-best; each kept folder says why), instead of or with
        ``keep_last``. ``card``: the same commit updates the table of checkpoints in
        ``README.md``."""
        from ckpt_action.ops.prune import prune

        repo = names.repo_id(repo)
        if retention is None:
            retention = Retention(keep_last=keep_last)
        elif keep_last is not None:
            if retention.keep_last is not None and retention.keep_last != keep_last:
                raise InputError(f"{param('keep_last')} is given twice, {keep_last} and {retention.keep_last} in"
                                 " retention: give it once", param="keep_last")
            retention = replace(retention, keep_last=keep_last)
        keep, keep_every, keep_best = retention_rules(retention)
        _refuse_card_on_bucket(card, repo)
        settings = self.settings()
        if not dry_run:
            names.token_for_write(settings.token or settings.auth == "oidc", settings.endpoint)
        remote = self._store(settings, repo, command="prune", write=not dry_run)
        return prune(remote, keep, dry_run=dry_run, free_storage=free_storage,
                     keep_every=keep_every, keep_best=keep_best, card=card)

    @boundary()
    def log_pointer(self, handle: CheckpointHandle, run: Any = None, *, artifact_name: str | None = None,
                    extra: dict[str, Any] | None = None, project: str | None = None, entity: str | None = None,
                    run_id: str | None = None, registry: str | None = None,
                    warn: Warn | None = None) -> PointerResult:
        """Log a W&B ``model-pointer`` artifact for ``handle`` (see :func:`ckpt_action.api.log_pointer`)."""
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
            result = wandb_pointer.log_pointer(handle, project=project,
                                               entity=entity or os.environ.get("WANDB_ENTITY"), run_id=run_id,
                                               artifact_name=artifact_name, extra=extra)
        else:
            result = wandb_pointer.log_pointer_to_run(handle, run, artifact_name=artifact_name, extra=extra)
        if registry:
            try:
                ref = f"{result.entity}/{result.project}/{result.artifact_name}:latest"
                wandb_pointer.link_to_registry(ref, registry, project=result.project, entity=result.entity)
            except CkptError as exc:
                (warn or _log_warning)(f"the pointer is logged, but linking it into {registry} failed: {exc}")
        return result

    # Last: its name shadows the builtin in the class body.
    @boundary()
    def list(self, repo: str, *, revision: str | None = None, warn: Warn | None = None,
             tags: bool = False) -> ListResult:
        """Every checkpoint of ``repo`` at one SHA, newest step first, with the SHA read (see
        :func:`ckpt_action.api.list_checkpoints`). ``tags``: also the tags made for each folder
        (the model card's tags column; a bucket has none)."""
        from ckpt_action.ops.prune import list_repo, tagged_folders

        repo = names.repo_id(repo)
        revision = names.revision(revision)
        remote = self._store(self.settings(), repo, command="list")
        res = list_repo(remote, revision, warn or _log_warning)
        if not tags or names.bucket(repo) is not None or res.revision is None:
            return res
        return replace(res, tags=tagged_folders(remote, [i.subfolder for i in res.checkpoints]))


def pulled_checkpoint(local_dir: PathLike) -> tuple[str, str, str] | None:
    """(repo, subfolder, revision) of the checkpoint a pull left in ``local_dir`` (its
    record, ``.ckpt-pull.json``), or None when there is none or it cannot be trusted.

    After a pull into ``resume/checkpoint-300`` (not run here: it needs a pulled dir)::

        pulled_checkpoint("resume/checkpoint-300")
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


def active_wandb_run() -> Any:
    """The W&B run active in this process, or None (a disabled run counts as none); W&B is
    imported only if it already is."""
    from ckpt_action.wandb import sdk as wandb_pointer

    return wandb_pointer.active_run()

