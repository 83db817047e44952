"""Progress for long transfers: periodic lines in CI logs, the client's bars in a terminal (the
CLI); the Python API's calls print the lines only, in a terminal too (:func:`own_progress`)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

_LINES: contextvars.ContextVar[bool] = contextvars.ContextVar("ckpt_action_progress_lines", default=True)
"""Whether transfers in this context print periodic progress lines (a context, not a global:
the Trainer callback's push thread turns them off for itself only)."""


_OWN: contextvars.ContextVar[bool] = contextvars.ContextVar("ckpt_action_own_progress", default=False)
"""Whether transfers in this context print their lines in a terminal too (the Python API's
calls, which turn the client's bars off: :func:`own_progress`)."""


@contextlib.contextmanager
def no_progress_lines() -> Iterator[None]:
    """No :class:`Ticker` lines for transfers run inside (this thread or task only).

    >>> with no_progress_lines():
    ...     Ticker("x", 1, lambda: 1, interval=5).__enter__()._active
    False
    """
    token = _LINES.set(False)
    try:
        yield
    finally:
        _LINES.reset(token)


def human(n: float) -> str:
    """
    >>> human(1536), human(3 * 1024**3)
    ('1.5 KiB', '3.0 GiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def interactive(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: stderr as it is now, not as it was at import) is a terminal outside CI."""
    return (stream or sys.stderr).isatty() and not os.environ.get("CI")


def quiet_client_bars() -> None:
    """In CI the client's tqdm bars write a line per refresh; our periodic lines replace them."""
    if not interactive():
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        if "huggingface_hub.constants" not in sys.modules:
            # The client reads the variable once, when its constants load: set before, it is
            # enough, and the call below would import tqdm (and asyncio) for nothing, a cost
            # every fresh process of a command that shows no bar would pay.
            return
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except ImportError:  # pragma: no cover - older clients
            pass


# The client's bar switch is one per process (huggingface_hub offers no per-call one): calls
# that turn it off at once (threads of one program) share one hold, and the last one out puts
# back what the caller had, every group's setting as it was.
_BARS_LOCK = threading.Lock()
_bars_held = 0
_bars_before: dict[str, bool] = {}


@contextlib.contextmanager
def client_bars_off() -> Iterator[None]:
    """huggingface_hub's progress bars (and hf_xet's, which it draws) off inside, as they were
    again after: for a caller that prints its own progress (the Python API, the demo). Where
    ``HF_HUB_DISABLE_PROGRESS_BARS`` is set, it decides (``0``: the user wants the bars).

    >>> from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars
    >>> before = are_progress_bars_disabled()
    >>> with client_bars_off():
    ...     are_progress_bars_disabled()
    True
    >>> are_progress_bars_disabled() == before
    True
    """
    global _bars_held, _bars_before
    import importlib

    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars

    hub_tqdm = importlib.import_module("huggingface_hub.utils.tqdm")  # the module (the package's name is the class)

    if constants.HF_HUB_DISABLE_PROGRESS_BARS is not None:  # the environment decides, not a call
        yield
        return
    with _BARS_LOCK:
        if _bars_held == 0:
            _bars_before = dict(hub_tqdm.progress_bar_states)
            disable_progress_bars()
        _bars_held += 1
    try:
        yield
    finally:
        with _BARS_LOCK:
            _bars_held -= 1
            if _bars_held == 0:
                hub_tqdm.progress_bar_states.clear()
                hub_tqdm.progress_bar_states.update(_bars_before)


@contextlib.contextmanager
def own_progress() -> Iterator[None]:
    """Progress as the Python API shows it, for the calls made inside (this thread or task):
    no client bars (:func:`client_bars_off`), and this module's lines (:class:`Ticker`) on
    stderr, in a terminal too; ``CKPT_PROGRESS_INTERVAL=0`` turns them off."""
    token = _OWN.set(True)
    try:
        with client_bars_off():
            yield
    finally:
        _OWN.reset(token)


def bytes_read_since_now() -> Callable[[], int]:
    """Bytes this process has read since the call (Linux ``/proc/self/io``), for progress
    of uploads the client performs out of our sight; 0 where the counter is missing."""

    def rchar() -> int | None:
        try:
            with open("/proc/self/io", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("rchar:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    start = rchar()
    if start is None:
        return lambda: 0
    return lambda: max(0, (rchar() or start) - start)


class Ticker:
    """Print ``label: done / total (pct), Ns`` every ``interval`` seconds while a transfer
    runs, and a closing line, in CI logs; in a terminal the client's own bars show instead.

    ``measure`` returns the bytes done so far; it runs on a background thread.
    """

    def __init__(self, label: str, total: int, measure: Callable[[], int], interval: float | None = None,
                 stream: TextIO | None = None) -> None:
        # stderr as it is when the transfer runs: a caller may have redirected it since import.
        self.label, self.total, self.measure, self.stream = label, total, measure, stream or sys.stderr
        self.interval = interval if interval is not None else float(os.environ.get("CKPT_PROGRESS_INTERVAL", "10"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = 0.0
        self._active = False

    def _line(self) -> str:
        done = min(self.measure(), self.total)
        pct = 100.0 * done / self.total if self.total else 100.0
        elapsed = time.monotonic() - self._started
        return f"{self.label}: {human(done)} / {human(self.total)} ({pct:.0f}%), {elapsed:.0f} s"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            print(self._line(), file=self.stream, flush=True)

    def __enter__(self) -> Ticker:
        self._started = time.monotonic()
        self._active = (_OWN.get() or not interactive(self.stream)) and self.interval > 0 and _LINES.get()
        if self._active:
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._active and exc_type is None:  # interval 0 (the demo) prints nothing
            elapsed = time.monotonic() - self._started
            print(f"{self.label}: done, {human(self.total)} in {elapsed:.1f} s", file=self.stream, flush=True)
