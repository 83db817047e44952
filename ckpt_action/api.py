"""``import ckpt_action as ckpt``: the commands as functions, each a thin call on a
:class:`~ckpt_action.client.Client` made from its connection keywords.

Every command's steps live once, in :mod:`ckpt_action.client` (``Client.push``,
``Client.latest``, ... answering full results); these keep the signatures the package has
always had and answer the handle or path. The keywords are the CLI's options
(``endpoint``, ``token``, ``timeout``, ``retries``, ``auth``, ...) defaulting from the same environment
variables (``HF_ENDPOINT``, ``HF_TOKEN``, ``CKPT_*``); ``auth="oidc"`` (or ``"auto"`` in a job that
can mint an OIDC id token and has no token) authenticates keyless: a short-lived token per repo,
exchanged from the job's id token (:class:`~ckpt_action.options.Connection`); the signing and verification
keywords become the client's option groups (:class:`~ckpt_action.options.Signing`,
:class:`~ckpt_action.options.Verification`). Errors raise, as subclasses of
:class:`~ckpt_action.errors.CkptError` naming parameters as ``tag=`` here and ``--tag`` on
the CLI, through the client's one error boundary; nothing answers None for "could not
tell". A call changes nothing global.

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

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from ckpt_action.client import Client, pulled_checkpoint
from ckpt_action.options import Connection, Retention, Signing, Verification
from ckpt_action.progress import own_progress

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from ckpt_action.handle import CheckpointHandle
    from ckpt_action.ops.discover import CheckpointInfo, LatestResult
    from ckpt_action.ops.prune import PruneResult
    from ckpt_action.wandb.sdk import PointerResult

PathLike = str | os.PathLike[str]
Warn = Callable[[str], None]

__all__ = ["latest", "list_checkpoints", "log_pointer", "promote", "prune", "pull", "pulled_checkpoint", "push"]


def __getattr__(name: str) -> Any:
    # The result types (PruneResult was defined here): beside the operations that make them.
    from ckpt_action import client

    return getattr(client, name)


GROUPS: dict[str, Any] = {"signing": Signing, "verification": Verification, "retention": Retention}
"""The option groups a method takes, which the functions spell as their fields' keywords."""
CONNECTION = tuple(f.name for f in fields(Connection))
"""The keywords that make the function's :class:`Client` (``endpoint``, ``token``, ...)."""


def _on_client(method: str, given: dict[str, Any]) -> Any:
    """The one call every function makes: its connection keywords make a :class:`Client`, the
    keywords of an option group (``signing_key=``...) become the group the method takes
    (:class:`~ckpt_action.options.Signing`...), the rest go to the method by name."""
    given = dict(given)
    client = Client(**{name: given.pop(name) for name in CONNECTION if name in given})
    takes = inspect.signature(getattr(Client, method)).parameters
    for name, group in GROUPS.items():
        if name in takes:
            given[name] = group(**{f.name: given.pop(f.name) for f in fields(group) if f.name in given})
    with own_progress():  # its own lines on stderr, no client bars; put back as they were after
        return getattr(client, method)(**given)


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
    auth: str | None = None,
    metrics: Mapping[str, float] | None = None,
    card: bool = False,
) -> CheckpointHandle:
    """Push ``local_dir`` to ``repo/<subfolder>/`` and return the handle of the commit holding it complete.

    With a signer (``signing_key=``, plus ``signing_certificate=``/``signing_chain=``, or
    ``sign_keyless=True``; see :class:`~ckpt_action.options.Signing`) the same commit as the manifest writes
    ``model.sig`` and the signed provenance statement.

    ``step`` alone names the subfolder ``checkpoint-<step>``; ``subfolder`` names it
    otherwise (``sft``). The folder on the Hub ends up exactly equal to ``local_dir``, its
    manifest committed with the last files; identical content makes no commit and returns
    the current SHA. A repo that does not exist is created, private unless ``private=False``.
    ``metrics={"eval_loss": 0.31}`` records what the checkpoint scored in its manifest
    (``list`` shows them; ``latest``/``promote``'s ``best=`` and ``prune``'s ``keep_best=`` choose by them).
    ``card=True`` also keeps the table of the repo's checkpoints in its ``README.md`` (between
    markers; the rest of the card untouched), in the same commit as the manifest.

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
    process outside any process group pushes alone, as without it, unless its launcher
    says the job has several processes (``WORLD_SIZE`` over 1): that is an InputError, as
    each rank would publish its own files as the checkpoint.

    On every rank of a ``torchrun`` job (a process group is needed, so this example is not run here)::

        ckpt.push(f"out/checkpoint-300", repo="org/run", step=300, distributed=True)
        # -> CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='3f1c…', step=300, ...)
    """
    return _on_client("push", locals()).handle


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
    auth: str | None = None,
    best: str | None = None,
) -> CheckpointHandle | None:
    """The highest complete ``checkpoint-N`` of ``repo``, pinned to the SHA it was read at.

    None only when there is no complete checkpoint: the repo or its branch does not exist
    yet, or holds none. Any failure to tell (401, 5xx after retries, a timeout, an unknown
    ``revision``) raises. ``require=True`` raises
    :class:`~ckpt_action.errors.NoCheckpointError` instead of returning None. With
    ``verify_key=`` (or ``verify_certificate_chain=``, ``verify_identity=``/``verify_issuer=``)
    a folder whose signature does not verify is passed over (a warning names it);
    ``verify_min_step=`` refuses (raises) when the newest that verifies has a lower step.
    ``best="eval_loss:min"`` (or ``METRIC:max``) takes the complete checkpoint best by that
    metric of its manifest instead of the highest (a checkpoint without it is never taken).

    >>> ckpt.latest("org/run")  # doctest: +ELLIPSIS
    CheckpointHandle(repo='org/run', subfolder='checkpoint-300', revision='...', step=300, endpoint='http://127.0.0.1:...')
    """
    return _on_client("latest", locals()).handle


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
    auth: str | None = None,
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
    ``found``, the :meth:`Client.latest <ckpt_action.client.Client.latest>` result whose
    handle ``source`` is, saves reading again what it read of that folder.

    >>> ckpt.pull(found, "resume/") == scratch / "resume"
    True
    >>> sorted(p.name for p in (scratch / "resume").iterdir())
    ['.ckpt-pull.json', 'ckpt-manifest.json', 'config.json', 'model.safetensors']
    >>> ckpt.pull("org/run", "copy-200/", subfolder="checkpoint-200", revision=sha).name
    'copy-200'
    """
    return _on_client("pull", locals()).local_dir


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
    return _on_client("log_pointer", locals())


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
    auth: str | None = None,
    best: str | None = None,
    card: bool = False,
    as_model: bool = False,
    max_shard_size: int | str | None = None,
    strip_prefix: str | None = None,
) -> CheckpointHandle:
    """Copy a checkpoint to the folder ``to`` (``release``) in one commit, and return the target's handle.

    The signing keywords are :func:`push`'s: the target gets its own ``model.sig`` and
    provenance statement (the source's are never copied).

    In the same repo the Hub copies the files server-side (no bytes move); with
    ``to_repo`` they stream through this machine, verified. ``tag`` tags the resulting
    commit (a tag pointing elsewhere raises :class:`~ckpt_action.errors.ConflictError`);
    ``branch`` commits on that branch, created from the source SHA. Re-running is a no-op.
    ``best="eval_loss:min"`` (no ``subfolder``, and a repo id as ``source``) promotes the
    complete checkpoint best by that metric at ``revision`` (``latest(best=)``'s choice).
    ``card=True`` updates the table of checkpoints in ``README.md`` in the same commit.
    ``as_model=True`` makes the target a folder ``from_pretrained`` loads: the weights (a DCP
    checkpoint or ``.bin`` pickles converted to safetensors, sharded at ``max_shard_size``,
    default ``"5GB"``, ``strip_prefix`` taken off their names), config, generation config,
    tokenizer and processor files, model card and license; never the optimizer, scheduler,
    RNG or trainer state, the training arguments or any pickle.

    >>> ckpt.promote(found, "release", tag="v1.0")  # doctest: +ELLIPSIS
    CheckpointHandle(repo='org/run', subfolder='release', revision='...', step=300, endpoint='http://127.0.0.1:...')
    """
    return _on_client("promote", locals()).handle


def list_checkpoints(
    repo: str,
    *,
    revision: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    auth: str | None = None,
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
    return _on_client("list", locals()).checkpoints


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
    auth: str | None = None,
    keep_every: int | None = None,
    keep_best: str | None = None,
    card: bool = False,
) -> PruneResult:
    """Delete all but the newest ``keep_last`` ``checkpoint-N`` folders, in one commit.

    ``keep_every=N`` also keeps every checkpoint whose step is a multiple of N, and
    ``keep_best="eval_loss:min:K"`` (``METRIC:min|max[:K]``, K default 1) the K best by that
    metric of their manifests; a folder is kept when any of them keeps it (each kept folder
    says why). ``keep_best`` on a metric no checkpoint records raises InputError before
    anything is deleted. ``keep_last=None`` with ``keep_every`` or ``keep_best`` keeps by
    those alone (``keep_best`` alone keeps every checkpoint without the metric).
    ``card=True`` updates the table of checkpoints in ``README.md`` in the prune's commit.

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
    return _on_client("prune", locals())
