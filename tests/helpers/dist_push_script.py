"""One rank of a distributed push, as a torchrun worker runs it (tests/helpers/dist_helpers.py launches it).

Every rank records what it got in ``OUT_DIR/rank-R.json``: the handle, or the error's
type, message and exit code, and how long the push took. Settings come from the
environment (HF_ENDPOINT, HF_TOKEN, CKPT_*), as a job's would:

- ``LOCAL_DIR``: the rank's dir, ``{rank}`` and ``{node}`` filled in;
- ``REPO``, ``STEP``;
- ``RAISE_RANK``: that rank raises in the "training code" before it calls push;
- ``PROXY_RANK_<r>``: rank r's requests to the Hub go through this reverse proxy (one that
  can kill it or refuse its uploads), its endpoint the same as every other rank's (the
  ranks must agree on it);
- ``PID_DIR``: each rank writes its pid there before it pushes;
- ``GROUP_RANKS``: only these ranks push, with ``group=`` a group of them;
- ``SCENARIOS``: a JSON list of pushes made one after the other in the one process group
  (several tests share a launch), each an object that may set any of the keys above but
  ``STEP`` for that push (the environment's otherwise), and ``ENV``: environment variables
  set for that push alone (``HF_ENDPOINT``, ``CKPT_DISTRIBUTED_TIMEOUT``), as a job would
  set them before it calls push. A scenario in which a rank does not call push (``RAISE_RANK``)
  comes last: each rank counts its pushes, and the n-th of every rank is the same push.
"""

from __future__ import annotations

import faulthandler
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch.distributed as dist

import ckpt_action as ckpt
from tests.helpers.dist_exit import exit_now


def through(proxy: str, hub: str) -> None:
    """Send this process's requests for ``hub`` to ``proxy`` instead, every URL unchanged
    (the Host header too), through the client factory huggingface_hub offers for that."""
    from urllib.parse import urlsplit

    import httpx2
    import huggingface_hub
    from huggingface_hub.utils._http import hf_request_event_hook

    to = urlsplit(proxy)

    class Via(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            request.url = request.url.copy_with(host=to.hostname, port=to.port)
            return super().handle_request(request)

    origin = urlsplit(hub)
    huggingface_hub.set_client_factory(lambda: httpx2.Client(
        mounts={f"{origin.scheme}://{origin.hostname}:{origin.port}": Via()},
        event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None))


def direct() -> None:
    """This process's requests go to the Hub directly again (huggingface_hub's own client)."""
    import huggingface_hub
    from huggingface_hub.utils._http import default_client_factory

    huggingface_hub.set_client_factory(default_client_factory)


def main() -> int:
    if os.environ.get("DUMP_AFTER"):  # debugging a hung job: every thread's stack, to stderr
        faulthandler.dump_traceback_later(float(os.environ["DUMP_AFTER"]))
    dist.init_process_group("gloo")
    rank, node = dist.get_rank(), int(os.environ.get("GROUP_RANK", "0"))
    scenarios = json.loads(os.environ["SCENARIOS"]) if os.environ.get("SCENARIOS") else [{}]
    for scenario in scenarios:
        conf = {key: scenario.get(key, os.environ.get(key, "")) for key in (*KEYS, f"PROXY_RANK_{rank}")}
        with environment(scenario.get("ENV", {})):
            push_once(rank, node, conf)
    # Exit 0 whatever happened: torchrun kills the other ranks as soon as one fails, and
    # the test wants to see what each of them raised.
    dist.destroy_process_group()
    return 0


KEYS = ("LOCAL_DIR", "REPO", "OUT_DIR", "GROUP_RANKS", "RAISE_RANK", "PID_DIR")


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment for the duration (the settings a push reads from it)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def push_once(rank: int, node: int, conf: dict[str, str]) -> None:
    """One push of this rank, recorded in ``OUT_DIR/rank-R.json``."""
    if conf["PID_DIR"]:
        Path(conf["PID_DIR"], f"rank-{rank}.pid").write_text(str(os.getpid()))
    proxy = conf[f"PROXY_RANK_{rank}"]
    if proxy:
        through(proxy, os.environ["HF_ENDPOINT"])
    out = Path(conf["OUT_DIR"]) / f"rank-{rank}.json"
    local_dir = conf["LOCAL_DIR"].format(rank=rank, node=node)
    started = time.monotonic()
    record: dict[str, object]
    members = [int(r) for r in conf["GROUP_RANKS"].split(",")] if conf["GROUP_RANKS"] else None
    group = dist.new_group(members) if members else None  # every rank takes part in making it
    try:
        if conf["RAISE_RANK"] == str(rank):
            raise RuntimeError("the training step failed")
        if members and rank not in members:
            record = {"skipped": True}
        else:
            handle = ckpt.push(local_dir, conf["REPO"], step=int(os.environ["STEP"]), distributed=True, group=group)
            record = {"handle": [handle.repo, handle.subfolder, handle.revision, handle.step]}
    except Exception as exc:  # the test reads what each rank raised
        record = {"error": type(exc).__name__, "message": str(exc), "exit_code": getattr(exc, "exit_code", None)}
    finally:
        if proxy:
            direct()
    record["seconds"] = time.monotonic() - started
    out.write_text(json.dumps(record))


if __name__ == "__main__":
    exit_now(main())
