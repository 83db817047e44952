"""``python -m bench.nodelay_hub ARGS``: the local Hub's own entry point, with Nagle off.

The local Hub writes a response's headers and body in two sends. With Nagle's algorithm
on, the second (small) send waits for the client's delayed ACK, about 40 ms on Linux, so
every small API response took ~40 ms and request latency, not the approach, dominated
``latest``. The real Hub does not behave like this, so the bench turns Nagle off
(``disable_nagle_algorithm``, which socketserver applies per connection). When the server
does so itself this wrapper changes nothing.
"""

from __future__ import annotations

import sys

from ckpt_action.localhub import server
from ckpt_action.localhub.__main__ import main

PATCHED = not getattr(server._Handler, "disable_nagle_algorithm", False)

if __name__ == "__main__":
    server._Handler.disable_nagle_algorithm = True
    sys.exit(main(sys.argv[1:]))
