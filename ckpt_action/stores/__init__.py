"""Where checkpoints live, behind one interface: the operations (push, latest, pull,
promote, list, prune) speak to a :class:`~ckpt_action.stores.base.Store`, never to
huggingface_hub or :mod:`ckpt_action.hub` directly.

- :mod:`.base`: the :class:`Store` protocol, the pin, the store-neutral writes
  (:class:`Put`, :class:`Delete`, :class:`Copy` in a :class:`Write`), and how a bucket
  implements each method;
- :mod:`.finalize`: the one finalize every writer publishes a complete manifest through;
- :mod:`.repo`: :class:`RepoStore`, a model repo (today's git-repo behaviour);
- :mod:`.bucket`: :class:`BucketStore`, a Storage Bucket (``hf://buckets/ORG/NAME[/PREFIX]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.hub.fetch import THREADED_HASH_MIN
from ckpt_action.hub.repo import RemoteRepo, folder_problem, skip_name
from ckpt_action.stores.base import (
    LIVE,
    Copy,
    Delete,
    Final,
    Operation,
    Pin,
    Put,
    Store,
    Uploaded,
    Write,
    WriteOutcome,
)
from ckpt_action.stores.bucket import BucketStore
from ckpt_action.stores.finalize import FinalizeRefused, Identity, finalize
from ckpt_action.stores.repo import RepoStore, as_store

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from ckpt_action.settings import Settings

StoreLike = Store | RemoteRepo
"""What an operation takes: a store, or the repo the API hands over (made a :class:`RepoStore`)."""



def open_store(settings: Settings, repo: str, api: HfApi | None = None) -> StoreLike:
    """The store a checked repo string names: a :class:`BucketStore` for
    ``hf://buckets/...``, else the model repo as the API hands it to the operations (a
    :class:`RemoteRepo`, which they take as its :class:`RepoStore`)."""
    from ckpt_action import names

    if names.bucket(repo) is not None:
        return BucketStore(settings, repo, api=api)
    return RemoteRepo(settings, repo, api=api)


__all__ = [
    "LIVE", "THREADED_HASH_MIN", "BucketStore", "Copy", "Delete", "Final", "FinalizeRefused", "Identity", "Operation",
    "Pin", "Put", "RepoStore", "Snapshot", "Store", "StoreLike", "Uploaded", "Write", "WriteOutcome", "as_store",
    "finalize", "folder_problem", "open_store", "skip_name",
]
