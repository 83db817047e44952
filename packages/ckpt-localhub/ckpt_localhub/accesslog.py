"""The access log: one JSON line per request, flushed as it is written.

Fields: ``ts`` (unix time), ``method``, ``path`` (the target as sent, with its query),
``status`` (a number, ``"reset"`` for a connection dropped by a fault, or
``"disconnected"``), ``bytes_in``, ``bytes_out``, ``ms``, ``listener`` (``"hub"``,
``"cdn"`` or ``"cas"``, the Xet CAS), ``auth`` (whether the request carried an ``Authorization``
header),
``credential`` (which: ``exchanged:SCOPE:TYPE/REPO`` for a token from ``/oauth/token``, ``static``, ``xet``
for a CAS token, ``invalid``, or null; never the token) and ``request_id`` (the ``X-Request-Id``
answered, when there was an answer).
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any


class AccessLog:
    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8") if path else None

    def write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            return
        with self._lock:
            if self._fh is not None:
                self._fh.write(json.dumps(record) + "\n")
                self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
