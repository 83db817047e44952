"""The W&B SDK adapter: log, fetch and link pointer artifacts (the format is in :mod:`.format`).

Unlike the helper this grew from, logging does not need a run active in the training
process: :func:`log_pointer` starts (or, given ``run_id``, attaches to) a run itself and
finishes it; :func:`log_pointer_to_run` logs to a run the process already has (the Python
API and the Trainer callback use it for ``wandb.run``). ``wandb`` is imported only inside
the functions that need it (the import costs about 0.7 s), so importing this module stays
cheap, and every run this module starts comes from one place (:func:`_init`). wandb
writes nothing to stdout while these functions run (the CLI prints JSON there).

Environment defaults (WANDB_PROJECT, WANDB_ENTITY, WANDB_RUN_ID) are resolved by the doors.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckpt_action import names
from ckpt_action.errors import CkptError, InputError, one_line
from ckpt_action.handle import CheckpointHandle
from ckpt_action.wandb.format import (
    ARTIFACT_TYPE,
    POINTER_FILE,
    SECRET_ENV,
    default_artifact_name,
    pointer_payload,
    read_pointer,
)

_OFFLINE_MODES = ("offline", "dryrun", "disabled")


class WandbError(CkptError):
    """W&B (or the network to it) failed; the Hub side may well have succeeded. Exit code 1."""


@dataclass(frozen=True)
class PointerResult:
    """What :func:`log_pointer` logged."""

    artifact_name: str
    run_id: str
    aliases: tuple[str, ...]
    payload: dict[str, Any] = field(default_factory=dict)
    project: str = ""
    entity: str | None = None


# --------------------------------------------------------------------------- helpers


def _exc_line(exc: BaseException) -> str:
    """An exception W&B raised, as ``Type: its first line``, with the secrets it may echo masked."""
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    for var in SECRET_ENV:
        secret = os.environ.get(var, "")
        if len(secret) >= 8:
            msg = msg.replace(secret, "***")
    msg = one_line(msg)
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _mode(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("WANDB_DISABLED", "").lower() in ("true", "1", "yes"):
        return "disabled"
    return env.get("WANDB_MODE", "online").strip().lower() or "online"


def _require_online(what: str) -> None:
    mode = _mode()
    if mode in _OFFLINE_MODES:
        raise WandbError(f"{what} needs W&B reachable (online mode); WANDB_MODE is {mode}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Python-level stdout goes to stderr while wandb runs (stdout is the CLI's JSON)."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


@contextlib.contextmanager
def _no_config_defaults(wandb: Any) -> Iterator[None]:
    """Stop wandb reading ``config-defaults.yaml`` from the cwd into the run config.

    The pointer run's config is exactly what we pass (nothing); a training repo's
    ``config-defaults.yaml`` must not be merged into it (or upserted into the training run).
    """
    cfg_cls = getattr(getattr(getattr(wandb, "sdk", None), "wandb_config", None), "Config", None)
    if cfg_cls is None or not hasattr(cfg_cls, "_load_defaults"):
        yield
        return
    original = cfg_cls.__dict__.get("_load_defaults")
    cfg_cls._load_defaults = lambda self: None
    try:
        yield
    finally:
        if original is not None:
            cfg_cls._load_defaults = original
        else:  # it was inherited: drop our override
            del cfg_cls._load_defaults


@contextlib.contextmanager
def _then_finish(run: Any, what: str) -> Iterator[None]:
    """Run a block against a W&B run, then finish the run (when given: one we started).

    Any wandb failure, in the block or in finish, becomes one WandbError, the first one.
    """
    error: WandbError | None = None
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
        error = WandbError(f"W&B {what} failed: {_exc_line(exc)}")
    finally:
        if run is not None:
            try:
                run.finish()
            except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
                error = error or WandbError(f"W&B run finish failed: {_exc_line(exc)}")
    if error is not None:
        raise error


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise WandbError(f"wandb is not installed: {_exc_line(exc)}") from None
    return wandb


def _settings(wandb: Any, init_timeout: float | None) -> Any:
    """Quiet settings that collect nothing beyond what we log.

    No system metadata (it records argv, which may hold a token), no git info (remote URLs
    can embed credentials), no code saving, no console capture, no system stats.
    """
    kwargs: dict[str, Any] = {
        "silent": True,
        "console": "off",
        "save_code": False,
        "disable_git": True,
        "disable_job_creation": True,
        "x_disable_meta": True,
        "x_disable_stats": True,
        "x_disable_machine_info": True,
    }
    if init_timeout is not None:
        kwargs["init_timeout"] = float(init_timeout)
    return wandb.Settings(**kwargs)


def _init(wandb: Any, *, project: str, entity: str | None, job_type: str | None, run_id: str | None = None,
          init_timeout: float | None = None) -> Any:
    """The one ``wandb.init`` of this package: a short run of its own (or, with ``run_id``,
    attached to that run), with none of the ambient config, any failure a WandbError."""
    try:
        with _no_config_defaults(wandb):
            return wandb.init(
                project=project,
                entity=entity,
                id=run_id,
                resume="allow" if run_id else None,
                job_type=job_type,
                config={},
                reinit="create_new",
                settings=_settings(wandb, init_timeout),
            )
    # wandb raises many unrelated types (CommError, UsageError, pydantic's ValidationError...).
    except Exception as exc:  # noqa: BLE001
        raise WandbError(f"W&B run init failed: {_exc_line(exc)}") from None


# --------------------------------------------------------------------------- logging


def _pointer(handle: CheckpointHandle, artifact_name: str | None,
             extra: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The artifact name (checked), the payload and the aliases for ``handle``."""
    name = default_artifact_name(handle.repo, handle.subfolder) if artifact_name is None else artifact_name
    if not names.WANDB_ARTIFACT_RE.fullmatch(name):
        raise InputError(f"invalid W&B artifact name {name!r}: use 1-128 of A-Z a-z 0-9 . _ -")
    payload = pointer_payload(handle, extra)
    aliases: tuple[str, ...] = ("latest",) if handle.step is None else ("latest", f"step-{handle.step}")
    return name, payload, aliases


def _log_artifact(wandb: Any, run: Any, handle: CheckpointHandle, name: str, payload: dict[str, Any],
                  aliases: tuple[str, ...]) -> None:
    """Log the pointer artifact to ``run`` (wandb failures propagate to the caller)."""
    with tempfile.TemporaryDirectory(prefix="ckpt-pointer-") as tmp:
        path = Path(tmp) / POINTER_FILE
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        artifact = wandb.Artifact(
            name=name,
            type=ARTIFACT_TYPE,
            description=f"Pointer to {handle.hub_url}",
            metadata=payload,
        )
        # add_file copies into wandb's staging dir right away (that copy is what gets
        # uploaded, or synced later when offline), so the temp dir can go.
        artifact.add_file(str(path), name=POINTER_FILE)
        run.log_artifact(artifact, aliases=list(aliases))


def active_run() -> Any | None:
    """The W&B run active in this process (``wandb.run``), or None.

    Never imports wandb: a process that has not imported it has no run. A disabled run
    (``mode="disabled"``) logs nothing, so it counts as none.
    """
    wandb = sys.modules.get("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is None or getattr(run, "disabled", False):
        return None
    return run


def log_pointer_to_run(
    handle: CheckpointHandle,
    run: Any,
    *,
    artifact_name: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> PointerResult:
    """Log a ``model-pointer`` artifact for ``handle`` to ``run``, a run of this process.

    The run is the caller's (a training run): it is neither started nor finished here.
    Raises :class:`InputError` for a bad name/extra, :class:`WandbError` for any W&B
    failure, and for a disabled run (it would log nothing).
    """
    name, payload, aliases = _pointer(handle, artifact_name, extra)
    if run is None or getattr(run, "disabled", False):
        raise WandbError("no active W&B run: call wandb.init() first, or pass the run")
    wandb = _import_wandb()
    with _quiet(), _then_finish(None, "pointer logging"):
        _log_artifact(wandb, run, handle, name, payload, aliases)
    return PointerResult(
        artifact_name=name,
        run_id=str(getattr(run, "id", "")),
        aliases=aliases,
        payload=payload,
        project=str(getattr(run, "project", "") or ""),
        entity=getattr(run, "entity", None) or None,
    )


def log_pointer(
    handle: CheckpointHandle,
    *,
    project: str,
    entity: str | None = None,
    run_id: str | None = None,
    artifact_name: str | None = None,
    job_type: str | None = None,
    extra: Mapping[str, Any] | None = None,
    init_timeout: float | None = None,
) -> PointerResult:
    """Log a ``model-pointer`` artifact for ``handle`` and return what was logged.

    With ``run_id`` it attaches to that run (``resume="allow"``) so the pointer shows on the
    training run; ``job_type`` then defaults to None (the run keeps its own). Without it, a
    short run with ``job_type="checkpoint"`` is made. The run started here is always
    finished; a run with that id already active in this process is used and left open.
    Raises :class:`InputError` for a bad name/extra, :class:`WandbError` for any W&B failure
    (and when W&B is disabled, since nothing would be logged).
    """
    if not project:
        raise InputError("a W&B project is required to log a pointer")
    name, payload, aliases = _pointer(handle, artifact_name, extra)
    if job_type is None and run_id is None:
        job_type = "checkpoint"
    if _mode() == "disabled":  # wandb would hand back a dummy run and log nothing
        raise WandbError("W&B is disabled (WANDB_MODE=disabled or WANDB_DISABLED): no pointer logged")

    wandb = _import_wandb()
    with _quiet():
        run = None
        started = False
        active = getattr(wandb, "run", None)
        if run_id and active is not None and getattr(active, "id", None) == run_id:
            run = active
        else:
            run = _init(wandb, project=project, entity=entity, job_type=job_type, run_id=run_id,
                        init_timeout=init_timeout)
            started = True
        with _then_finish(run if started else None, "pointer logging"):
            _log_artifact(wandb, run, handle, name, payload, aliases)
            logged_run_id = str(run.id)
    return PointerResult(
        artifact_name=name,
        run_id=logged_run_id,
        aliases=aliases,
        payload=payload,
        project=project,
        entity=entity,
    )


# --------------------------------------------------------------------------- W&B reads and links


def fetch_pointer(ref: str, *, timeout: float, max_bytes: int | None = None,
                  before_request: Callable[[], None] | None = None) -> CheckpointHandle:
    """Resolve ``ENTITY/PROJECT/NAME:ALIAS`` on W&B, download its ``checkpoint.json``, read it.

    Online only: with WANDB_MODE offline/disabled raises :class:`WandbError` at once.
    ``before_request``: called once the ref is checked, before anything reaches W&B.
    """
    if not names.WANDB_REF_RE.fullmatch(ref):
        raise InputError(f"W&B pointer ref must look like ENTITY/PROJECT/NAME:ALIAS, got {ref!r}")
    if before_request is not None:
        before_request()
    _require_online("fetching a W&B pointer")
    wandb = _import_wandb()
    with _quiet():
        try:
            api = wandb.Api(timeout=max(1, int(timeout)))
            artifact = api.artifact(ref)
            if artifact.type != ARTIFACT_TYPE:
                raise InputError(f"W&B artifact {ref} has type {artifact.type!r}, not {ARTIFACT_TYPE!r}")
            with tempfile.TemporaryDirectory(prefix="ckpt-pointer-") as tmp:
                root = artifact.download(root=tmp)
                return read_pointer(root, max_bytes=max_bytes, name="from_wandb")
        except CkptError:
            raise
        except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
            raise WandbError(f"W&B pointer fetch failed for {ref}: {_exc_line(exc)}") from None


def link_to_registry(
    source_ref: str,
    target_path: str,
    *,
    project: str,
    entity: str | None = None,
    aliases: list[str] | None = None,
    init_timeout: float | None = None,
) -> str:
    """Link a logged pointer (``ENTITY/PROJECT/NAME:ALIAS``) into a registry collection.

    ``target_path`` is ``wandb-registry-REGISTRY/COLLECTION`` (optionally ``ORG/`` first).
    Uses a short ``job_type="promote"`` run: ``run.use_artifact`` then ``run.link_artifact``.
    Online only: offline raises :class:`WandbError` "W&B registry linking needs online mode".
    Returns the target path.
    """
    if not names.WANDB_REF_RE.fullmatch(source_ref):
        raise InputError(f"W&B pointer ref must look like ENTITY/PROJECT/NAME:ALIAS, got {source_ref!r}")
    if not names.WANDB_REGISTRY_RE.fullmatch(target_path):
        raise InputError(f"registry target must look like wandb-registry-NAME/COLLECTION: {target_path!r}")
    if _mode() in _OFFLINE_MODES:
        raise WandbError("W&B registry linking needs online mode")
    wandb = _import_wandb()
    with _quiet():
        run = _init(wandb, project=project, entity=entity, job_type="promote", init_timeout=init_timeout)
        with _then_finish(run, "registry link"):
            artifact = run.use_artifact(source_ref, type=ARTIFACT_TYPE)
            run.link_artifact(artifact, target_path, aliases=aliases)
    return target_path
