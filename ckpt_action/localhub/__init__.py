"""A local, Hub-compatible server for moving checkpoints without the real Hub.

The real ``huggingface_hub`` client and ``hf`` CLI talk to it unchanged over HTTP
(set ``HF_ENDPOINT`` to its URL and ``HF_HUB_DISABLE_XET=1``). Used by the demo and by
CI tests, with optional auth, an access log and injected faults.

Example:

    >>> from ckpt_action.localhub import LocalHub
    >>> with LocalHub("/tmp/hubdata") as hub:
    ...     print(hub.url)
    http://127.0.0.1:40411

    $ python -m ckpt_action.localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
"""

from .faults import FaultFileError, FaultSet
from .server import LocalHub, run_server
from .storage import Storage

__all__ = ["FaultFileError", "FaultSet", "LocalHub", "Storage", "run_server"]
