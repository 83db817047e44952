"""Run settings: where the Hub is, the token, and the bounds on time and retries.

Every bound is configurable (flags or ``CKPT_*`` environment variables), so tests and
impatient pipelines shorten them instead of patching code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import InputError
from .validate import endpoint as check_endpoint


@dataclass(frozen=True)
class Settings:
    """How to reach the Hub and how hard to try.

    >>> Settings.from_env({"HF_ENDPOINT": "http://127.0.0.1:8000", "CKPT_RETRIES": "2"}).retries
    2
    """

    endpoint: str
    token: str | None = None
    timeout: float = 60.0
    """Seconds one request may stay silent (connect, or between bytes) before it is retried."""
    retries: int = 5
    """Retries after the first attempt, for transient failures (408, 429, 5xx, timeouts, resets)."""
    retry_delay: float = 1.0
    """First backoff delay; doubles per retry, capped by retry_max_delay, jittered."""
    retry_max_delay: float = 30.0
    max_files_per_commit: int = 100
    """The Hub recommends under 100 files a commit; bigger checkpoints go in several."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {k: v for k, v in given.items() if v is not None}
        values.setdefault("endpoint", env.get("HF_ENDPOINT"))
        values["endpoint"] = check_endpoint(values.get("endpoint"))  # type: ignore[arg-type]
        values.setdefault("token", env.get("HF_TOKEN") or None)
        numbers = {
            "timeout": ("CKPT_TIMEOUT", float),
            "retries": ("CKPT_RETRIES", int),
            "retry_delay": ("CKPT_RETRY_DELAY", float),
            "retry_max_delay": ("CKPT_RETRY_MAX_DELAY", float),
            "max_files_per_commit": ("CKPT_MAX_FILES_PER_COMMIT", int),
        }
        for name, (var, kind) in numbers.items():
            if name not in values and env.get(var):
                try:
                    values[name] = kind(env[var])
                except ValueError:
                    raise InputError(f"{var}={env[var]!r} is not a number") from None
        settings = cls(**values)  # type: ignore[arg-type]
        if settings.timeout <= 0 or settings.retries < 0 or settings.retry_delay < 0:
            raise InputError("timeouts must be > 0 and retries/delays >= 0")
        if settings.max_files_per_commit < 2:
            raise InputError("max files per commit must be at least 2 (one file plus the manifest)")
        return settings
