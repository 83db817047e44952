"""Run a Python command line and write the bytes it read (Linux ``/proc/self/io``) at exit.

``python -m bench.readcount OUT SCRIPT ARGS...`` runs SCRIPT (``entrypoint.py``, the
``hf`` console script) in this process and, when it exits, writes ``{"rchar": ...,
"read_bytes": ...}`` to OUT: what the process read since just before SCRIPT started.
``rchar`` counts every read(2) of the process, the page cache's hits included (a warm
file reads 0 ``read_bytes``) and the reads of hf_xet's Rust threads (they are threads of
this process), so it is the one that counts how often a file is read. The client
libraries are imported before counting starts, so the count is the command's work, not
the interpreter loading modules.
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
from pathlib import Path


def counters() -> dict[str, int]:
    with open("/proc/self/io", encoding="ascii") as fh:
        pairs = (line.split(":", 1) for line in fh)
        return {key: int(value) for key, value in pairs if key in ("rchar", "read_bytes")}


def main() -> None:
    out, script, *args = sys.argv[1:]
    import hf_xet  # noqa: F401 - imported before counting, see the module docstring
    import huggingface_hub.cli.hf  # noqa: F401

    import ckpt_action.cli.app  # noqa: F401

    start = counters()

    def report() -> None:
        end = counters()
        Path(out).write_text(json.dumps({key: end[key] - start[key] for key in start}))

    atexit.register(report)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
