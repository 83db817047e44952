"""What the sections share: the mode, a scratch dir, one local Hub, and in-process clients."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hubproc import HubProcess, client_env


def configure_client_env() -> None:
    """Set before huggingface_hub is imported in this process: plain LFS, no bars, no telemetry.

    The in-process timings (the bench calling ``latest`` directly) then never include the
    telemetry call; subprocesses get their own environment from ``client_env``.
    """
    os.environ.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
                      HF_HUB_DISABLE_UPDATE_CHECK="1")


@dataclass
class Context:
    quick: bool
    work: Path
    hub: HubProcess
    _homes: itertools.count[int] = field(default_factory=itertools.count)
    cache: dict[str, Any] = field(default_factory=dict)
    """What one section set up and a later one reuses (the pushed checkpoint)."""

    @property
    def url(self) -> str:
        return self.hub.url

    def env(self, hub: HubProcess | None = None) -> dict[str, str]:
        """A client process environment with a fresh HF_HOME (no cache carried between runs)."""
        return client_env((hub or self.hub).url, self.work / "homes" / f"h{next(self._homes)}")

    def api(self, hub: HubProcess | None = None) -> Any:
        from huggingface_hub import HfApi

        return HfApi(endpoint=(hub or self.hub).url, token="hf_bench")

    def settings(self, hub: HubProcess | None = None) -> Any:
        from ckpt_action.settings import Settings

        return Settings((hub or self.hub).url, token="hf_bench")
