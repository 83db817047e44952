"""ckpt-action: move training checkpoints between CI jobs and a Hugging Face Hub repo.

Every checkpoint handed out is pinned to an immutable commit SHA. The package holds the
core (no Click here), the CLI over it (``ckpt_action.cli.app``) and the Python API::

    import ckpt_action as ckpt

    h = ckpt.push("out/checkpoint-300", repo="org/run", step=300)
    found = ckpt.latest("org/run")
    path = ckpt.pull(found, "resume/")

or, the connection given once and each command answering its full result::

    client = ckpt.Client(endpoint="https://huggingface.co", retries=3)
    res = client.push("out/checkpoint-300", "org/run", step=300, signing=ckpt.Signing(signing_key="key.pem"))

The API's names are resolved on first use (PEP 562), so ``import ckpt_action`` imports
neither huggingface_hub nor wandb: a CLI call or a training script pays for them only
when it talks to the Hub or W&B.
"""

from __future__ import annotations

from ckpt_action.version import __version__ as __version__

# typing's import costs more than this package's own (CPython 3.14 spells it this way too).
TYPE_CHECKING = False

# Exported name -> the module (in this package) that defines it.
_EXPORTS: dict[str, str] = {
    "push": "api",
    "latest": "api",
    "pull": "api",
    "log_pointer": "api",
    "promote": "api",
    "list_checkpoints": "api",
    "prune": "api",
    "PruneResult": "ops.prune",
    "Client": "client",
    "Connection": "options",
    "Retention": "options",
    "Signing": "options",
    "Verification": "options",
    "CheckpointHandle": "handle",
    "CheckpointInfo": "ops.discover",
    "PointerResult": "wandb.sdk",
    "CkptError": "errors",
    "InputError": "errors",
    "RemoteError": "errors",
    "AuthError": "errors",
    "NotFoundError": "errors",
    "IntegrityError": "errors",
    "NoCheckpointError": "errors",
    "ConflictError": "errors",
    "SignatureError": "checkpoint.signing",
    "LocalIOError": "errors",
    "DistributedError": "errors",
    "WandbError": "wandb.sdk",
    "Watcher": "watch.watcher",
}
__all__ = [  # the same names as _EXPORTS (a test checks)
    "AuthError",
    "CheckpointHandle",
    "CheckpointInfo",
    "CkptError",
    "Client",
    "ConflictError",
    "Connection",
    "DistributedError",
    "InputError",
    "IntegrityError",
    "LocalIOError",
    "NoCheckpointError",
    "NotFoundError",
    "PointerResult",
    "PruneResult",
    "RemoteError",
    "Retention",
    "SignatureError",
    "Signing",
    "Verification",
    "WandbError",
    "Watcher",
    "latest",
    "list_checkpoints",
    "log_pointer",
    "promote",
    "prune",
    "pull",
    "push",
]

if TYPE_CHECKING:
    from typing import Any

    from ckpt_action.ops.discover import CheckpointInfo
    from ckpt_action.ops.prune import PruneResult
    from ckpt_action.wandb.sdk import PointerResult, WandbError
    from ckpt_action.watch.watcher import Watcher

    from .api import latest, list_checkpoints, log_pointer, promote, prune, pull, push
    from .client import Client
    from .errors import (
        AuthError,
        CkptError,
        ConflictError,
        DistributedError,
        InputError,
        IntegrityError,
        LocalIOError,
        NoCheckpointError,
        NotFoundError,
        RemoteError,
    )
    from .handle import CheckpointHandle
    from .options import Connection, Retention, Signing, Verification


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
