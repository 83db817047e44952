"""The retry schedule as docs/concepts/promises.md states it, measured on the sleeps actually taken
(``time.sleep`` recorded, not slept): exponential from CKPT_RETRY_DELAY, ±20% jitter,
capped at CKPT_RETRY_MAX_DELAY; and calls huggingface_hub retries itself (preupload, LFS)
get one more round after a pause, not CKPT_RETRIES more, so retries do not multiply."""

from __future__ import annotations

import time

import pytest

import ckpt_action as ckpt
from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import ckpt as ckpt_files
from tests.helpers.chaos_helpers import seed
from tests.helpers.hostile_proxy import hostile_fixture  # noqa: F401


@pytest.fixture
def slept(monkeypatch):
    """Every backoff sleep of this process (0.1 s or more), recorded and skipped; the short
    polls of threads that wait for something still sleep, or they would spin."""
    record: list[float] = []
    real = time.sleep

    def sleep(seconds: float) -> None:
        if seconds < 0.1:
            real(seconds)
        else:
            record.append(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return record


def test_backoff_is_exponential_jittered_and_capped_as_the_readme_says(hub_server, hf_client, hostile, slept,
                                                                      monkeypatch):
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt_files(1), hub.base / "seed", step=1)
    proxy = hostile(hub)
    proxy.set_rules([{"method": "GET", "path": "/tree/main$", "status": 503, "times": -1}])  # latest's first read
    monkeypatch.setenv("CKPT_RETRY_DELAY", "1")
    monkeypatch.setenv("CKPT_RETRY_MAX_DELAY", "5")
    with pytest.raises(ckpt.RemoteError):
        ckpt.latest("o/r", endpoint=proxy.url, retries=6)
    bases = [1, 2, 4, 5, 5, 5]  # doubling from 1 s, capped at 5 s
    assert len(slept) == len(bases), slept
    for got, base in zip(slept, bases, strict=True):
        assert 0.8 * base <= got <= 1.2 * base, (slept, bases)
    assert len({round(s / b, 6) for s, b in zip(slept, bases, strict=True)}) > 1, "no jitter"
    assert proxy.fired(0) == 7  # the first attempt and six retries


def test_calls_the_client_retries_itself_get_one_more_round(hub_server, hf_client, hostile, slept, tmp_path):
    hub = hub_server()
    proxy = hostile(hub)
    proxy.set_rules([{"method": "POST", "path": "/preupload/", "status": 503, "times": -1}])
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w" * 100})
    with pytest.raises(ckpt.RemoteError):
        ckpt.push(src, "o/r", step=1, endpoint=proxy.url, retries=5)
    preuploads = proxy.fired(0)
    # huggingface_hub tries a preupload 6 times; one more round of those, not 5 more.
    assert 6 < preuploads <= 12, preuploads
