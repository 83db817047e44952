"""Progress for long transfers: periodic lines in CI logs, the client's bars in a terminal."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO


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


def interactive(stream: TextIO = sys.stderr) -> bool:
    return stream.isatty() and not os.environ.get("CI")


def quiet_client_bars() -> None:
    """In CI the client's tqdm bars write a line per refresh; our periodic lines replace them."""
    if not interactive():
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except ImportError:  # pragma: no cover - older clients
            pass


class Ticker:
    """Print ``label: done / total (pct)`` every ``interval`` seconds while a transfer runs.

    ``measure`` returns the bytes done so far; it runs on a background thread.
    """

    def __init__(self, label: str, total: int, measure: Callable[[], int], interval: float | None = None,
                 stream: TextIO = sys.stderr) -> None:
        self.label, self.total, self.measure, self.stream = label, total, measure, stream
        self.interval = interval if interval is not None else float(os.environ.get("CKPT_PROGRESS_INTERVAL", "10"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _line(self) -> str:
        done = min(self.measure(), self.total)
        pct = 100.0 * done / self.total if self.total else 100.0
        return f"{self.label}: {human(done)} / {human(self.total)} ({pct:.0f}%)"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            print(self._line(), file=self.stream, flush=True)

    def __enter__(self) -> Ticker:
        if not interactive(self.stream) and self.interval > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
