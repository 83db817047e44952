"""A local, Hub-compatible server for moving checkpoints without the real Hub.

The real ``huggingface_hub`` client, ``hf`` CLI and ``hf_xet`` talk to it unchanged over HTTP
(set ``HF_ENDPOINT`` to its URL; Xet or, with ``HF_HUB_DISABLE_XET=1``, plain LFS). It is for tests, demos and
offline trials: every claim ckpt-action makes is tested against it, so it behaves like
the Hub wherever a client can tell the difference (README lists where it still differs).

Rooms: ``httpmessages`` / ``httpconnection`` / ``httpserver`` (HTTP/1.1: requests and
answers, one connection, the listener and its cap), ``app`` (one listener's application: route,
faults, Hub-worded errors), ``routes`` (method and path to handler), ``context`` (the
shared state and one request's checks: auth, visibility, revisions), ``api_repos`` /
``api_git`` / ``api_commit`` / ``api_storage`` (the endpoints), ``transfer`` (LFS and
downloads, the CDN), ``api_xet`` and ``xet/`` (the Xet token routes and the CAS service),
``signing`` (the signed, expiring URLs of LFS, the CDN and the CAS), ``names`` /
``repos`` / ``storage`` / ``objects`` (names and refusals, repos and refs, trees and commits,
content-addressed objects), ``usage`` (storage accounting, permanent
deletion, garbage collection), ``faults`` / ``faultlayer`` (injected failures), ``accesslog``
(one JSON line per request), ``server`` (listeners), ``command`` and ``__main__`` (the
command line), ``process`` (the server as a child process, for tests and benchmarks),
``gitobjects`` (git object ids, LFS pointers and the LFS decision) and ``filelock`` (the data
dir's lock). It imports nothing of ckpt-action: its git facts are its own copy, so a bug in
the client's cannot agree with itself on both sides.

Example:

    >>> from ckpt_localhub import LocalHub
    >>> with LocalHub("hubdata") as hub:  # doctest: +ELLIPSIS
    ...     print(hub.url)
    http://127.0.0.1:...

    $ python -m ckpt_localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
"""

from .faults import FaultFileError, FaultSet
from .objects import StorageError
from .server import LocalHub, run_server
from .storage import Storage

__all__ = ["FaultFileError", "FaultSet", "LocalHub", "Storage", "StorageError", "run_server"]
