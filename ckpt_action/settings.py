"""Run settings: where the Hub is, the token, and the bounds on time, retries and size.

Every bound is configurable (flags or ``CKPT_*`` environment variables), so tests and
impatient pipelines shorten them instead of patching code, and a repo that really is
bigger than a bound can raise it. The README's settings table is generated from here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ckpt_action.names import COUNT_FORM, NUMBER_FORM, count_text, number_text
from ckpt_action.names import endpoint as check_endpoint

from .errors import InputError, param, quoted

_TOKEN_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))
"""What a token may hold once stripped: visible ASCII. Anything else (a space, a newline
inside, a control or non-ASCII character) is a broken paste, and would either make an
illegal header (whose error text carries the token) or be sent as something else."""


def read_token(value: str | None) -> str | None:
    """The token as sent: stripped of surrounding whitespace (a secret pasted with its
    newline, a ``token: |`` block); None when nothing is left.

    >>> read_token("hf_abc\\n")
    'hf_abc'
    """
    if value is None:
        return None
    token = value.strip()
    if token and not set(token) <= _TOKEN_CHARS:
        # Never the token itself, nor where in it: any part of it is a part of the secret.
        raise InputError("the token (HF_TOKEN, --token or token=) holds a space, a control or a non-ASCII"
                         " character inside it: paste it again as one line")
    return token or None

MAX_RETRIES = 20
"""More retries than this only multiply how long a dead Hub holds a job."""


MAX_TOKEN_FILE_BYTES = 4096
"""A saved token is about 40 characters; a bigger file is not one (and is not read whole)."""


THREADED_HASH_MIN = 16 * 1024 * 1024
"""A file this big downloaded alone is hashed in a thread of its own while the next buffer
arrives, so one transfer can use two cores. When several big files download at once they
already keep the cores busy, and handing buffers between threads only adds CPU (measured on
2 cores, 2 GiB in 5 files: 3.8 s of CPU inline, 4.4 s with hash threads)."""


def hf_home(env: Mapping[str, str]) -> str:
    """The user's Hugging Face dir, as huggingface_hub finds it (``HF_HOME``, else
    ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``), ``~`` expanded."""
    return os.path.expanduser(env.get("HF_HOME")
                              or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface"))


def saved_token(env: Mapping[str, str]) -> str | None:
    """The token ``hf auth login`` saved, where huggingface_hub looks for it (``HF_TOKEN_PATH``,
    else ``HF_HOME/token``, else ``~/.cache/huggingface/token``), or None.

    Read here without importing huggingface_hub, whose import must wait until the endpoint
    is known; huggingface_hub would send the same token when none is given.
    """
    path = os.path.expanduser(env.get("HF_TOKEN_PATH") or os.path.join(hf_home(env), "token"))
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError:
        return None
    token = data.decode("utf-8", "replace").strip()
    if len(data) > MAX_TOKEN_FILE_BYTES or not token or any(c.isspace() for c in token):
        return None
    return token


AUTH_CHOICES = ("auto", "token", "oidc")
"""The ``auth`` choice of every door (``--auth``, ``auth=``, input ``auth``)."""


@dataclass(frozen=True)
class OidcSource:
    """Where an OIDC id token comes from (huggingface_hub's rules, ``huggingface_hub._oidc``):
    ``HF_OIDC_ID_TOKEN`` as given (any CI system; it cannot be minted again), else minted
    from GitHub Actions at ``ACTIONS_ID_TOKEN_REQUEST_URL`` (a job with ``permissions:
    id-token: write``); ``resource``: ``HF_OIDC_RESOURCE``, the one repo to scope the token to
    (None: each repo a command touches, one exchange each)."""

    id_token: str | None = field(default=None, repr=False)
    request_url: str | None = field(default=None, repr=False)
    request_token: str | None = field(default=None, repr=False)
    resource: str | None = None


def resolve_auth(choice: str | None, token: str | None, env: Mapping[str, str]) -> tuple[str, OidcSource | None]:
    """(``token`` | ``oidc`` | ``none``, the id token's source) for the ``auth`` choice.

    ``auto`` (the default): a token given (``token``, ``HF_TOKEN``, a saved one) is sent; else
    the exchange when the job can show an id token (``ACTIONS_ID_TOKEN_REQUEST_URL``, or
    ``HF_OIDC_ID_TOKEN``; ``HF_OIDC_RESOURCE`` asks for it too); else no token. ``token`` needs
    a token, ``oidc`` an id token: each an InputError naming ``auth`` without one.

    >>> resolve_auth(None, "hf_x", {"ACTIONS_ID_TOKEN_REQUEST_URL": "u"})[0]
    'token'
    >>> resolve_auth("auto", None, {"HF_OIDC_ID_TOKEN": "eyJ"})[0], resolve_auth("auto", None, {})[0]
    ('oidc', 'none')
    """
    choice = (choice or "auto").strip().lower()
    if choice not in AUTH_CHOICES:
        raise InputError(f"{param('auth')} must be auto, token or oidc, not {choice[:40]!r}", param="auth")
    source = OidcSource(id_token=(env.get("HF_OIDC_ID_TOKEN") or "").strip() or None,
                        request_url=env.get("ACTIONS_ID_TOKEN_REQUEST_URL") or None,
                        request_token=env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN") or None,
                        resource=(env.get("HF_OIDC_RESOURCE") or "").strip() or None)
    can_mint = source.id_token is not None or (source.request_url is not None and source.request_token is not None)
    if choice == "token" or (choice == "auto" and token):
        if not token:
            raise InputError(f"{param('auth')} token needs a token: set HF_TOKEN or pass {param('token')} (or use"
                             f" {param('auth')} oidc in a job that can mint an id token)", param="auth")
        return "token", None
    if choice == "oidc" or source.id_token is not None or source.request_url is not None \
            or source.resource is not None:
        if not can_mint:
            raise InputError(f"{param('auth')} oidc needs an OIDC id token: run in a GitHub Actions job with"
                             " `permissions: id-token: write` (ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN), or set"
                             " HF_OIDC_ID_TOKEN to your CI system's id token", param="auth")
        return "oidc", source
    return "none", None


def _knob(default: float | int, env: str, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """How to reach the Hub, how hard to try, and how much of its answers to accept.

    >>> Settings.from_env({"HF_ENDPOINT": "http://127.0.0.1:8000", "CKPT_RETRIES": "2"}).retries
    2
    """

    endpoint: str
    token: str | None = field(default=None, repr=False)
    """Stripped and checked (:func:`read_token`); never in a repr."""
    timeout: float = _knob(60.0, "CKPT_TIMEOUT",
                           "Seconds one request may stay silent (connect, or between bytes) before it is retried.")
    retries: int = _knob(5, "CKPT_RETRIES",
                         "Retries after the first attempt, for 408, 429, 5xx, timeouts and dropped connections "
                         f"(at most {MAX_RETRIES}).")
    retry_delay: float = _knob(1.0, "CKPT_RETRY_DELAY",
                               "First backoff delay in seconds; doubles per retry, jittered ±20%.")
    retry_max_delay: float = _knob(30.0, "CKPT_RETRY_MAX_DELAY", "Cap on one backoff delay in seconds.")
    max_rate_limit_wait: float = _knob(
        600.0, "CKPT_MAX_RATE_LIMIT_WAIT",
        "Longest wait in seconds a rate-limited answer (`Retry-After`, or `RateLimit` with `r=0` and its reset `t`)"
        " is honoured for; the Hub asking for more fails the command at once.")
    request_deadline: float = _knob(
        120.0, "CKPT_REQUEST_DEADLINE",
        "Wall-clock seconds one read of refs, a listing page or a manifest may take in all (connect, headers"
        " and body), however steadily the bytes trickle in.")
    min_download_rate: int = _knob(
        64 * 1024, "CKPT_MIN_DOWNLOAD_RATE",
        "Bytes per second a file download must average: one attempt may take `request_deadline` plus its size at"
        " this rate, however steadily the bytes trickle in (then it resumes, as a retry).")
    max_attempt_seconds: float = _knob(
        6 * 3600.0, "CKPT_MAX_ATTEMPT_SECONDS",
        "Cap in seconds on one file download attempt's deadline, whatever size the listing claims (a claimed"
        " terabyte would otherwise get months); a bigger file needs this raised.")
    max_listing_pages: int = _knob(1000, "CKPT_MAX_LISTING_PAGES",
                                   "Pages one tree listing may span; more fails the command (exit 1).")
    max_listing_entries: int = _knob(
        200_000, "CKPT_MAX_LISTING_ENTRIES",
        "Files and folders one tree listing may hold (the Hub allows 100k files a repo); more fails the command.")
    max_listing_bytes: int = _knob(
        128 * 1024 * 1024, "CKPT_MAX_LISTING_BYTES",
        "Bytes of JSON one listing (all its pages, or the refs) may take; more fails the command.")
    max_manifest_bytes: int = _knob(64 * 1024 * 1024, "CKPT_MAX_MANIFEST_BYTES",
                                    "Bytes a `ckpt-manifest.json` may have; a bigger one makes its folder unreadable.")
    max_pointer_bytes: int = _knob(1024 * 1024, "CKPT_MAX_POINTER_BYTES",
                                   "Bytes a W&B pointer file (`--pointer`, or one fetched from W&B) may have; it is"
                                   " read only if it is a regular file, and no further than this.")
    max_files_per_commit: int = _knob(100, "CKPT_MAX_FILES_PER_COMMIT",
                                      "Files per commit (the Hub recommends under 100); bigger checkpoints go in "
                                      "several, the manifest in the last.")
    upload_concurrency: int = _knob(
        1, "CKPT_UPLOAD_CONCURRENCY",
        "Batches (`upload_batch_bytes`) a push into a model repo uploads at once, each registered on the Hub (its"
        " LFS objects, or its Xet shard) as soon as its own upload ends, before the one commit that publishes the"
        " checkpoint. A push cut off (killed, preempted) and run again sends again at most these batches, so what a"
        " re-run can re-send beyond the missing bytes is this many times a batch (or the biggest file). Above 1,"
        " concurrent Xet sessions of one process may name each other's xorbs before they are stored (the CAS"
        " refuses that shard): keep 1 on Xet. A Storage Bucket sends one batch at a time.")
    upload_batch_bytes: int = _knob(
        512 * 2**20, "CKPT_UPLOAD_BATCH_BYTES",
        "Bytes of files one batch of a push holds (a bigger file goes alone); each batch's LFS objects or Xet"
        " shard (in a Storage Bucket, its shard and paths) are on the Hub as soon as it ends. A push cut off and"
        " run again sends again at most the batches in flight: this or the biggest file, whichever is more. Lower"
        " bounds that, at a few requests more per batch (a bucket push never cut off: 1.1x one batch's time at 256"
        " MiB, 0.96x at 512, by `python -m bench --only 16`).")
    distributed_timeout: float = _knob(
        300.0, "CKPT_DISTRIBUTED_TIMEOUT",
        "Seconds a push from many ranks (`distributed`) waits for a rank that has not joined it or has stopped"
        " showing signs of life; then every rank fails, naming it.")

    preempt_deadline: float = _knob(
        0.0, "CKPT_PREEMPT_DEADLINE",
        "On SIGTERM, when `watch` and the Trainer callback must be done pushing: seconds after the signal (a value"
        " below 1e9, e.g. `120` under Slurm's `--signal=B:TERM@120`) or an epoch time (`$SLURM_JOB_END_TIME`, a spot"
        " notice's termination time). Replaces `--grace` / `sigterm_grace` when set; unset or 0: the grace.")

    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The token in each form it was given (as given, stripped), for scrubbing messages."""

    auth: str = "token"
    """How requests authenticate, resolved from the ``auth`` choice (:func:`resolve_auth`):
    ``token`` (``token``, if any, sent as is), ``oidc`` (a short-lived token exchanged per repo
    from the job's OIDC id token, :mod:`ckpt_action.stores.hub.keyless`) or ``none``."""
    oidc: OidcSource | None = field(default=None, repr=False, compare=False)
    """With ``auth="oidc"``: where the id token comes from and what to scope the exchanged
    token to (``HF_OIDC_RESOURCE``), read from the environment with the rest."""
    exchanges: Any = field(default=None, repr=False, compare=False)
    """The exchanged tokens of the client that made these settings, by endpoint and resource
    (kept by the client across its commands, so a long run re-exchanges only near expiry)."""

    def __post_init__(self) -> None:
        given = self.token
        object.__setattr__(self, "token", read_token(given))
        oidc_secret = self.oidc.id_token if self.oidc is not None else None
        kept = (*self.secrets, *(t for t in (given, self.token, oidc_secret) if t and t not in self.secrets))
        object.__setattr__(self, "secrets", kept)

    @classmethod
    def knobs(cls) -> list[tuple[str, str, object, str]]:
        """(field, environment variable, default, meaning) for every tunable bound."""
        return [(f.name, f.metadata["env"], f.default, f.metadata["doc"]) for f in fields(cls) if f.metadata]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {k: v for k, v in given.items() if v is not None}
        values.setdefault("endpoint", env.get("HF_ENDPOINT"))
        values["endpoint"] = check_endpoint(values.get("endpoint"))  # type: ignore[arg-type]
        values.setdefault("token", env.get("HF_TOKEN") or saved_token(env))
        values["auth"], values["oidc"] = resolve_auth(values.get("auth"), read_token(values.get("token")), env)  # type: ignore[arg-type]
        if values["auth"] != "token":
            values["token"] = None  # never sent: the exchange's tokens are (or none)
        for f in fields(cls):
            var = f.metadata.get("env")
            if var and f.name not in values and env.get(var):
                whole = isinstance(f.default, int)
                value = (count_text if whole else number_text)(env[var].strip())
                if value is None:
                    raise InputError(f"{var}={quoted(env[var], 40)} must be {COUNT_FORM if whole else NUMBER_FORM}")
                values[f.name] = value
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse bounds that bound nothing: nan and inf compare false with everything, so a
        "timeout > 0" check alone lets them through."""
        for f in fields(self):
            if not f.metadata:
                continue
            value = getattr(self, f.name)
            name = f"{f.name} ({param(f.name) + ' / ' if f.name in _PARAMS else ''}{f.metadata['env']})"
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{name} must be a finite number, not {value!r}")
            if f.name in _POSITIVE and value <= 0:
                raise InputError(f"{name} must be > 0, not {value!r}")
            if value < 0:
                raise InputError(f"{name} must be >= 0, not {value!r}")
        if self.retries > MAX_RETRIES:
            raise InputError(f"retries ({param('retries')} / CKPT_RETRIES) is {self.retries}: at most {MAX_RETRIES} are"
                             " allowed", param="retries")
        if self.max_files_per_commit < 2:
            raise InputError("max files per commit must be at least 2 (one file plus the manifest)")


# Bounds a door takes as a parameter of its own (the others only from the environment).
_PARAMS = {"timeout", "retries"}
# Bounds where 0 would refuse everything; the others (delays, retries, waits) may be 0.
_POSITIVE = {"timeout", "request_deadline", "min_download_rate", "max_attempt_seconds", "max_listing_pages",
             "max_listing_entries", "max_listing_bytes", "max_manifest_bytes", "max_pointer_bytes",
             "distributed_timeout", "upload_concurrency", "upload_batch_bytes"}
