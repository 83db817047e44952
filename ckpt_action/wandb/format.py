"""The W&B pointer format: a tiny ``checkpoint.json`` naming a Hub checkpoint, never the weights.

A pointer is an artifact of type ``model-pointer`` holding exactly one file,
``checkpoint.json``::

    {"repo": "org/run", "subfolder": "checkpoint-500", "revision": "<40-hex>",
     "step": 500, "hub_url": "https://huggingface.co/org/run/tree/<40-hex>/checkpoint-500"}

plus any ``extra`` keys. The artifact metadata is the same payload, and it gets the aliases
``latest`` and ``step-N`` (when the step is known). This module writes and reads that
format and imports nothing of W&B (its SDK adapter is :mod:`.sdk`); everything read is
validated before use (the file is untrusted).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ckpt_action import names
from ckpt_action.checkpoint.localfiles import read_bounded
from ckpt_action.errors import InputError, param
from ckpt_action.handle import (
    BUCKET_PIN_RE,
    CHECKPOINT_RE,
    DEFAULT_ENDPOINT,
    MAX_STEP,
    SHA_RE,
    CheckpointHandle,
    is_step,
    step_of,
)
from ckpt_action.settings import Settings

ARTIFACT_TYPE = "model-pointer"
POINTER_FILE = "checkpoint.json"
CORE_KEYS = ("repo", "subfolder", "revision", "step", "hub_url")
# The default of the max_pointer_bytes setting (CKPT_MAX_POINTER_BYTES), for a read given no bound.
MAX_POINTER_BYTES: int = next(f.default for f in fields(Settings) if f.name == "max_pointer_bytes")  # type: ignore[assignment]
# A pointer is a flat object with one level of extra fields: deeper JSON is not one.
MAX_POINTER_DEPTH = 32
ARTIFACT_NAME_MAX = 128
# Environment values that must never end up in a pointer (nor in a message about W&B).
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")


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
    >>> default_artifact_name("hf://buckets/org/ckpts/run-7", "checkpoint-7")  # a bucket: without its scheme
    'buckets--org--ckpts--run-7--checkpoint'
    """
    parts = [p for p in subfolder.strip("/").split("/") if p]
    if parts and CHECKPOINT_RE.match(parts[-1]):
        parts[-1] = "checkpoint"
    name = "--".join([*repo.removeprefix("hf://").split("/"), *parts])
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
    for var in SECRET_ENV:
        secret = os.environ.get(var, "")
        if len(secret) >= 8 and secret in text:
            raise InputError(f"refusing to log a pointer containing the value of {var}")
    return payload


def check_inputs(*, project: str | None = None, entity: str | None = None, run_id: str | None = None,
                 artifact_name: str | None = None, registry: str | None = None, prefix: str = "") -> None:
    """Refuse a W&B input W&B would refuse (or that would confuse a log), before anything
    is sent anywhere: push and promote check theirs before their first request, so a bad
    name never fails after the commit. Each error names its parameter, ``prefix`` + the
    keyword (the CLI's are ``wandb_project``: ``--wandb-project``), for the door to spell.

    >>> check_inputs(project="llama-sft", artifact_name="org--run--sft")
    >>> check_inputs(project="team/p")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ckpt_action.errors.InputError: project='team/p' is not a W&B name: use 1-128 characters without spaces ...
    """
    for key, value in (("project", project), ("entity", entity), ("run_id", run_id)):
        if value is not None and (not value.isprintable() or not names.WANDB_NAME_RE.match(value)):
            raise InputError(f"{param(prefix + key)} {value!r} is not a W&B name: use 1-128 characters without"
                             " spaces or / \\ # ? % : ; , ' \"", param=prefix + key)
    if artifact_name is not None and not names.WANDB_ARTIFACT_RE.match(artifact_name):
        raise InputError(f"{param(prefix + 'artifact_name')} {artifact_name!r} is not a valid W&B artifact name:"
                         " use 1-128 of A-Z a-z 0-9 . _ -", param=prefix + "artifact_name")
    if registry is not None and not names.WANDB_REGISTRY_RE.match(registry):
        raise InputError(f"{param(prefix + 'registry')} {registry!r} is not a registry collection: use"
                         " wandb-registry-NAME/COLLECTION", param=prefix + "registry")


# --------------------------------------------------------------------------- reading


def _bad(where: str, why: str) -> InputError:
    return InputError(f"invalid {where}: {why}", param="pointer")


def _check_repo(path: str, repo: object) -> str:
    if not isinstance(repo, str):
        raise _bad(path, f"repo must look like owner/name, got {repo!r}")
    try:
        return names.repo_id(repo)
    except InputError:
        raise _bad(path, f"repo must look like owner/name, got {repo!r}") from None


def _check_subfolder(path: str, sub: object) -> str:
    if not isinstance(sub, str) or any(ord(c) < 32 for c in sub):
        raise _bad(path, f"subfolder must be a relative path, got {sub!r}")
    checked = names.subfolder(sub, name=f"{path}: subfolder")
    if checked != sub:
        raise _bad(path, f"subfolder must be a relative path, got {sub!r}")
    return checked


def _endpoint_from(path: str, hub_url: object, suffix: str) -> str:
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


def _read_bounded(p: Path, max_bytes: int | None, name: str) -> Any:
    """The JSON of a pointer file, nested at most MAX_POINTER_DEPTH deep.

    Read by :func:`~ckpt_action.checkpoint.localfiles.read_bounded` (a regular file only, at
    most ``max_bytes``, the setting CKPT_MAX_POINTER_BYTES); errors name the parameter
    ``name`` that gave the file.
    """
    where = f"pointer file {p}"

    def _bad(where: str, why: str) -> InputError:
        return InputError(f"{param(name)}: invalid {where}: {why}", param=name)

    limit = MAX_POINTER_BYTES if max_bytes is None else max_bytes
    raw = read_bounded(p, limit, name, "pointer file", regular_hint="give the checkpoint.json itself",
                       large_hint="too large for a pointer (raise CKPT_MAX_POINTER_BYTES if it really is one)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(where, "not UTF-8 text") from None
    if _nesting(text) > MAX_POINTER_DEPTH:
        raise _bad(where, f"JSON nested more than {MAX_POINTER_DEPTH} levels deep, not a pointer")
    try:
        return json.loads(text)
    except ValueError:
        raise _bad(where, "not valid JSON") from None


def _nesting(text: str) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings aside): one
    linear pass, so the parser, which recurses per level, never sees a hostile depth."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def read_pointer(path: str | os.PathLike[str], *, max_bytes: int | None = None,
                 name: str = "pointer") -> CheckpointHandle:
    """Read and validate a ``checkpoint.json`` (or a directory holding one) into a handle.

    Checks the repo id shape, a 40-hex revision, a relative subfolder and, when present,
    that ``hub_url`` is ``<endpoint>/<repo>/tree/<revision>/<subfolder>``; the endpoint is
    taken from it (else the default). ``repo_id`` (the original helper's key) is accepted
    for ``repo``. Raises :class:`InputError` with a one-line message otherwise. The file is
    read only if it is a regular file, at most ``max_bytes`` (default: the
    ``max_pointer_bytes`` setting's), and parsed only if its nesting is shallow; a file it
    cannot read is reported against the parameter ``name``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / POINTER_FILE
    return parse_pointer(_read_bounded(p, max_bytes, name), f"pointer file {p}")


def parse_pointer(data: object, where: str = "pointer") -> CheckpointHandle:
    """Validate a pointer's JSON object (what ``checkpoint.json`` holds) into a handle, as
    :func:`read_pointer` does; ``where`` names it in messages."""
    p = where
    if not isinstance(data, dict):
        raise _bad(p, "expected a JSON object")
    repo = _check_repo(p, data.get("repo", data.get("repo_id")))
    revision = data.get("revision")
    if names.bucket(repo) is not None:  # a bucket's checkpoint is pinned by its manifest's sha256
        if not isinstance(revision, str) or not BUCKET_PIN_RE.match(revision):
            raise _bad(p, "revision must be a bucket checkpoint's pin sha256:<64 hex>")
    elif not isinstance(revision, str) or not SHA_RE.match(revision):
        raise _bad(p, "revision must be a 40-hex commit SHA")
    subfolder = _check_subfolder(p, data.get("subfolder"))
    step = data.get("step")
    if step is not None and not is_step(step):
        raise _bad(p, f"step must be a whole number from 0 to {MAX_STEP}, or null")
    implied = step_of(subfolder)
    if step is None:
        step = implied
    elif implied is not None and implied != step:
        raise _bad(p, f"step {step} disagrees with subfolder {subfolder}")
    endpoint = _endpoint_from(p, data.get("hub_url"), CheckpointHandle(repo, subfolder, revision, None, "").hub_url)
    return CheckpointHandle(repo=repo, subfolder=subfolder, revision=revision, step=step, endpoint=endpoint)
