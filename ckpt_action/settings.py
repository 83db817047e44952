"""Run settings: where the Hub is, the token, and the bounds on time and retries.

Every bound is configurable (flags or ``CKPT_*`` environment variables), so tests and
impatient pipelines shorten them instead of patching code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import InputError
from .validate import endpoint as check_endpoint


def _knob(default: float | int, env: str, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """How to reach the Hub and how hard to try.

    >>> Settings.from_env({"HF_ENDPOINT": "http://127.0.0.1:8000", "CKPT_RETRIES": "2"}).retries
    2
    """

    endpoint: str
    token: str | None = None
    timeout: float = _knob(60.0, "CKPT_TIMEOUT",
                           "Seconds one request may stay silent (connect, or between bytes) before it is retried.")
    retries: int = _knob(5, "CKPT_RETRIES",
                         "Retries after the first attempt, for 408, 429, 5xx, timeouts and dropped connections.")
    retry_delay: float = _knob(1.0, "CKPT_RETRY_DELAY",
                               "First backoff delay in seconds; doubles per retry, jittered ±20%.")
    retry_max_delay: float = _knob(30.0, "CKPT_RETRY_MAX_DELAY",
                                   "Cap on one backoff delay (a `Retry-After` from the Hub is honoured up to 600 s).")
    max_files_per_commit: int = _knob(100, "CKPT_MAX_FILES_PER_COMMIT",
                                      "Files per commit (the Hub recommends under 100); bigger checkpoints go in "
                                      "several, the manifest in the last.")

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
        values.setdefault("token", env.get("HF_TOKEN") or None)
        for f in fields(cls):
            var = f.metadata.get("env")
            if var and f.name not in values and env.get(var):
                kind = int if isinstance(f.default, int) else float
                try:
                    values[f.name] = kind(env[var])
                except ValueError:
                    raise InputError(f"{var}={env[var]!r} is not a number") from None
        settings = cls(**values)  # type: ignore[arg-type]
        if settings.timeout <= 0 or settings.retries < 0 or settings.retry_delay < 0:
            raise InputError("timeouts must be > 0 and retries/delays >= 0")
        if settings.max_files_per_commit < 2:
            raise InputError("max files per commit must be at least 2 (one file plus the manifest)")
        return settings
