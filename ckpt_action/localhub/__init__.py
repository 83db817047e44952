"""A local, Hub-compatible server for moving checkpoints without the real Hub.

The real ``huggingface_hub`` client and ``hf`` CLI talk to it unchanged over HTTP (set
``HF_ENDPOINT`` to its URL and ``HF_HUB_DISABLE_XET=1``). It is for tests, demos and
offline trials: every claim ckpt-action makes is tested against it, so it behaves like
the Hub wherever a client can tell the difference (README lists where it still differs).

Rooms: ``httpserver`` (HTTP/1.1 plumbing), ``routes`` (method and path to handler),
``api_repos`` / ``api_git`` / ``api_commit`` (the endpoints), ``transfer`` (LFS and
downloads, the CDN), ``storage`` / ``objects`` (repos and content-addressed objects),
``faults`` / ``faultlayer`` (injected failures), ``server`` (listeners), ``command``
(the command line). Git facts come from :mod:`ckpt_action.checkpoint.gitobjects`, the only part of
ckpt-action this package imports.

Example:

    >>> from ckpt_action.localhub import LocalHub  # doctest: +SKIP
    >>> with LocalHub("/tmp/hubdata") as hub:  # doctest: +SKIP
    ...     print(hub.url)
    http://127.0.0.1:40411

    $ python -m ckpt_action.localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
"""

from .faults import FaultFileError, FaultSet
from .objects import StorageError
from .server import LocalHub, run_server
from .storage import Storage

__all__ = ["FaultFileError", "FaultSet", "LocalHub", "Storage", "StorageError", "run_server"]
