"""W&B pointer artifacts: a tiny ``checkpoint.json`` naming a Hub checkpoint, never the weights.

A pointer is an artifact of type ``model-pointer`` holding exactly one file,
``checkpoint.json``::

    {"repo": "org/run", "subfolder": "checkpoint-500", "revision": "<40-hex>",
     "step": 500, "hub_url": "https://huggingface.co/org/run/tree/<40-hex>/checkpoint-500"}

plus any ``extra`` keys. The artifact metadata is the same payload, and it gets the aliases
``latest`` and ``step-N`` (when the step is known).

Unlike the helper this grew from, logging does not need a run active in the training
process: :func:`log_pointer` starts (or, given ``run_id``, attaches to) a run itself and
finishes it; :func:`log_pointer_to_run` logs to a run the process already has (the Python
API and the Trainer callback use it for ``wandb.run``). ``wandb`` is imported only inside
the functions that need it (the import costs about 0.7 s), so importing this module stays
cheap. wandb writes nothing to stdout while
these functions run (the CLI prints JSON there).

Environment defaults (WANDB_PROJECT, WANDB_ENTITY, WANDB_RUN_ID) are resolved by the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ckpt_action import names
from ckpt_action.errors import CkptError, InputError
from ckpt_action.handle import CHECKPOINT_RE, DEFAULT_ENDPOINT, SHA_RE, CheckpointHandle, step_of

ARTIFACT_TYPE = "model-pointer"
POINTER_FILE = "checkpoint.json"
CORE_KEYS = ("repo", "subfolder", "revision", "step", "hub_url")
MAX_POINTER_BYTES = 1 << 20

# Conservative subset of what W&B accepts (it only forbids "/" and > 128 chars): also keeps
# ":" out, so ENTITY/PROJECT/NAME:ALIAS stays unambiguous.
ARTIFACT_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
ARTIFACT_NAME_MAX = 128
# ENTITY/PROJECT/NAME:ALIAS (entity optional, as wandb allows).
_REF_RE = re.compile(r"^(?:[^/:\s]+/)?[^/:\s]+/[A-Za-z0-9._-]+:[A-Za-z0-9._-]+$")
_REGISTRY_TARGET_RE = re.compile(r"^(?:[^/:\s]+/)?wandb-registry-[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$")
# Environment values that must never end up in a pointer.
_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")
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


# --------------------------------------------------------------------------- naming


def default_artifact_name(repo: str, subfolder: str) -> str:
    """The default pointer name: repo and subfolder joined with ``--``.

    Rule: ``"/"`` in the repo and the subfolder becomes ``--`` (Hub repo names cannot
    contain ``--``, so the repo part stays recognisable); a trailing ``checkpoint-N``
    component becomes ``checkpoint`` so every step is a *version* of one artifact
    (``:latest`` is the newest, ``:step-N`` a given step); any character outside
    ``[A-Za-z0-9._-]`` becomes ``-``; names over 128 characters are cut to 119 plus ``-``
    and 8 hex of their sha256.

    >>> default_artifact_name("org/run", "checkpoint-1200")
    'org--run--checkpoint'
    >>> default_artifact_name("org/run", "sft")
    'org--run--sft'
    >>> default_artifact_name("org/run", "stage 2/checkpoint-7")
    'org--run--stage-2--checkpoint'
    """
    parts = [p for p in subfolder.strip("/").split("/") if p]
    if parts and CHECKPOINT_RE.match(parts[-1]):
        parts[-1] = "checkpoint"
    name = "--".join([*repo.split("/"), *parts])
    name = re.sub(r"[^A-Za-z0-9._-]", "-", name)
    if len(name) > ARTIFACT_NAME_MAX:
        import hashlib

        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: ARTIFACT_NAME_MAX - 9]}-{digest}"
    return name


def pointer_payload(handle: CheckpointHandle, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``checkpoint.json`` content (and artifact metadata) for ``handle``.

    ``extra`` keys may not shadow the core keys and must be JSON-serialisable.
    """
    payload: dict[str, Any] = dict(handle.to_dict())
    if extra:
        clash = sorted(set(extra) & set(CORE_KEYS))
        if clash:
            raise InputError(f"extra pointer fields may not override {', '.join(clash)}")
        payload.update(extra)
    try:
        text = json.dumps(payload, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"extra pointer fields must be JSON-serialisable: {exc}") from None
    for var in _SECRET_ENV:
        secret = os.environ.get(var, "")
        if len(secret) >= 8 and secret in text:
            raise InputError(f"refusing to log a pointer containing the value of {var}")
    return payload


# --------------------------------------------------------------------------- helpers


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    for var in _SECRET_ENV:
        secret = os.environ.get(var, "")
        if len(secret) >= 8:
            msg = msg.replace(secret, "***")
    msg = msg[:300]
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
        error = WandbError(f"W&B {what} failed: {_one_line(exc)}")
    finally:
        if run is not None:
            try:
                run.finish()
            except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
                error = error or WandbError(f"W&B run finish failed: {_one_line(exc)}")
    if error is not None:
        raise error


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise WandbError(f"wandb is not installed: {_one_line(exc)}") from None
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


# --------------------------------------------------------------------------- logging


def _pointer(handle: CheckpointHandle, artifact_name: str | None,
             extra: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The artifact name (checked), the payload and the aliases for ``handle``."""
    name = default_artifact_name(handle.repo, handle.subfolder) if artifact_name is None else artifact_name
    if not ARTIFACT_NAME_RE.match(name):
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
            try:
                with _no_config_defaults(wandb):
                    run = wandb.init(
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
                raise WandbError(f"W&B run init failed: {_one_line(exc)}") from None
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


# --------------------------------------------------------------------------- reading


def _bad(path: Path, why: str) -> InputError:
    return InputError(f"invalid pointer file {path}: {why}")


def _check_repo(path: Path, repo: object) -> str:
    if not isinstance(repo, str):
        raise _bad(path, f"repo must look like owner/name, got {repo!r}")
    try:
        return names.repo_id(repo)
    except InputError:
        raise _bad(path, f"repo must look like owner/name, got {repo!r}") from None


def _check_subfolder(path: Path, sub: object) -> str:
    if not isinstance(sub, str) or any(ord(c) < 32 for c in sub):
        raise _bad(path, f"subfolder must be a relative path, got {sub!r}")
    checked = names.subfolder(sub, flag=f"pointer file {path}: subfolder")
    if checked != sub:
        raise _bad(path, f"subfolder must be a relative path, got {sub!r}")
    return checked


def _endpoint_from(path: Path, hub_url: object, suffix: str) -> str:
    if hub_url is None:
        return DEFAULT_ENDPOINT
    if not isinstance(hub_url, str):
        raise _bad(path, "hub_url must be a string")
    if not hub_url.endswith(suffix):
        raise _bad(path, "hub_url does not match repo/revision/subfolder")
    endpoint = hub_url[: -len(suffix)]
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(path, "hub_url must be an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise _bad(path, "hub_url must not carry credentials")
    if parts.query or parts.fragment:
        raise _bad(path, "hub_url must not have a query or fragment")
    try:
        _ = parts.port
    except ValueError:
        raise _bad(path, "hub_url has an invalid port") from None
    return endpoint


def read_pointer(path: str | os.PathLike[str]) -> CheckpointHandle:
    """Read and validate a ``checkpoint.json`` (or a directory holding one) into a handle.

    Checks the repo id shape, a 40-hex revision, a relative subfolder and, when present,
    that ``hub_url`` is ``<endpoint>/<repo>/tree/<revision>/<subfolder>``; the endpoint is
    taken from it (else the default). ``repo_id`` (the original helper's key) is accepted
    for ``repo``. Raises :class:`InputError` with a one-line message otherwise.
    """
    p = Path(path)
    if p.is_dir():
        p = p / POINTER_FILE
    try:
        if p.stat().st_size > MAX_POINTER_BYTES:
            raise _bad(p, "too large for a pointer")
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"pointer file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read pointer file {p}: {_one_line(exc)}") from None
    except ValueError:
        raise _bad(p, "not valid JSON") from None
    if not isinstance(data, dict):
        raise _bad(p, "expected a JSON object")
    repo = _check_repo(p, data.get("repo", data.get("repo_id")))
    revision = data.get("revision")
    if not isinstance(revision, str) or not SHA_RE.match(revision):
        raise _bad(p, "revision must be a 40-hex commit SHA")
    subfolder = _check_subfolder(p, data.get("subfolder"))
    step = data.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise _bad(p, "step must be a non-negative integer or null")
    implied = step_of(subfolder)
    if step is None:
        step = implied
    elif implied is not None and implied != step:
        raise _bad(p, f"step {step} disagrees with subfolder {subfolder}")
    endpoint = _endpoint_from(p, data.get("hub_url"), f"/{repo}/tree/{revision}/{subfolder}")
    return CheckpointHandle(repo=repo, subfolder=subfolder, revision=revision, step=step, endpoint=endpoint)


def fetch_pointer(ref: str, *, timeout: float) -> CheckpointHandle:
    """Resolve ``ENTITY/PROJECT/NAME:ALIAS`` on W&B, download its ``checkpoint.json``, read it.

    Online only: with WANDB_MODE offline/disabled raises :class:`WandbError` at once.
    """
    if not _REF_RE.match(ref):
        raise InputError(f"W&B pointer ref must look like ENTITY/PROJECT/NAME:ALIAS, got {ref!r}")
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
                return read_pointer(root)
        except CkptError:
            raise
        except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
            raise WandbError(f"W&B pointer fetch failed for {ref}: {_one_line(exc)}") from None


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
    if not _REF_RE.match(source_ref):
        raise InputError(f"W&B pointer ref must look like ENTITY/PROJECT/NAME:ALIAS, got {source_ref!r}")
    if not _REGISTRY_TARGET_RE.match(target_path):
        raise InputError(f"registry target must look like wandb-registry-NAME/COLLECTION: {target_path!r}")
    if _mode() in _OFFLINE_MODES:
        raise WandbError("W&B registry linking needs online mode")
    wandb = _import_wandb()
    with _quiet():
        try:
            with _no_config_defaults(wandb):
                run = wandb.init(
                    project=project,
                    entity=entity,
                    job_type="promote",
                    config={},
                    reinit="create_new",
                    settings=_settings(wandb, init_timeout),
                )
        except Exception as exc:  # noqa: BLE001 - any wandb failure becomes WandbError
            raise WandbError(f"W&B run init failed: {_one_line(exc)}") from None
        with _then_finish(run, "registry link"):
            artifact = run.use_artifact(source_ref, type=ARTIFACT_TYPE)
            run.link_artifact(artifact, target_path, aliases=aliases)
    return target_path
