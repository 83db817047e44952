"""How the torchrun scripts of the distributed tests end: as a normal exit does, less the
interpreter's teardown of its modules.

Once torch is imported (DCP or transformers more so), Python's teardown of the modules
takes a second or more per process on a 2-core machine, after the rank has recorded what
it got; torchrun waits for it, and the test for torchrun. Everything of a normal exit
that a test could observe is done first, in the interpreter's order: the threading
module's exit hooks (an executor's idle workers told to stop) and every non-daemon
thread waited for (a push that left one running still hangs the job, which the launch's
timeout reports), then the ``atexit`` handlers (weakref finalizers, temporary dirs,
logging's flush), then the streams flushed. Only the teardown is skipped.

No pytest and no torch here: the rank scripts import it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    getattr(threading, "_shutdown")()  # noqa: B009 - what the interpreter calls first at exit; private
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
