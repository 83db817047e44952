"""Where checkpoints live, behind one interface: the operations (push, latest, pull,
promote, list, prune) speak to a :class:`~ckpt_action.stores.base.Store`, never to
huggingface_hub or :mod:`ckpt_action.stores.hub` directly.

- :mod:`.base`: the :class:`Store` protocol (and :class:`HistoryStore`, a store with a
  commit history), and how a bucket implements each method;
- :mod:`.writes`: the pin and the store-neutral writes (:class:`Put`, :class:`Delete`,
  :class:`Copy` in a :class:`Write`), one type for every store and for the repo's commits;
- :mod:`.finalize`: the one finalize every writer publishes a complete manifest through;
- :mod:`.repo`: :class:`RepoStore`, a model repo (today's git-repo behaviour);
- :mod:`.bucket`: :class:`BucketStore`, a Storage Bucket (``hf://buckets/ORG/NAME[/PREFIX]``).
"""

from __future__ import annotations

from typing import Any

from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.settings import Settings
from ckpt_action.stores.base import HistoryStore, Store, Uploaded, open_complete
from ckpt_action.stores.bucket import BucketStore
from ckpt_action.stores.finalize import FinalizeRefused, Identity, finalize
from ckpt_action.stores.hub.repo import folder_problem, skip_name
from ckpt_action.stores.repo import RepoStore
from ckpt_action.stores.writes import LIVE, Copy, Delete, Final, Operation, Pin, Put, Write, WriteOutcome

BUCKET_PREFIX = "hf://buckets/"


def open_store(settings: Settings, name: str, api: Any = None, *, command: str = "this command",
               write: bool = False) -> Store:
    """The store ``name`` (checked by :func:`ckpt_action.names.repo_id`) names: ``ORG/NAME``
    a model repo (:class:`RepoStore`); ``hf://buckets/ORG/NAME[/prefix]`` a Storage Bucket
    (:class:`BucketStore`). The client opens one per command and hands that object to the
    operations; ``api``: a huggingface_hub client to share (a second store of the same
    command). Keyless (``settings.auth == "oidc"``) each repo gets its own exchanged token,
    never a shared client, and a token that cannot do what ``command`` does (``write``) is
    refused here, before anything is uploaded; a bucket is refused (the exchange scopes repos)."""
    if name.startswith(BUCKET_PREFIX):
        return BucketStore(settings, name, api=api)
    if settings.auth != "oidc":
        return RepoStore.open(settings, name, api)
    from ckpt_action.stores.hub.keyless import token_for

    token_for(settings, name).require(name, write=write, command=command)
    return RepoStore.open(settings, name)

__all__ = [
    "LIVE",
    "BucketStore",
    "Copy",
    "Delete",
    "Final",
    "FinalizeRefused",
    "HistoryStore",
    "Identity",
    "Operation",
    "Pin",
    "Put",
    "RepoStore",
    "Snapshot",
    "Store",
    "Uploaded",
    "Write",
    "WriteOutcome",
    "finalize",
    "folder_problem",
    "open_complete",
    "open_store",
    "skip_name",
]
