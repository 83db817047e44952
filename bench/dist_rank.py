"""One rank of the distributed-push bench (section 8), as torchrun runs it.

Pushes ``BASE/rank-<rank>`` with ``push(distributed=True)`` and writes
``BASE/result-<rank>.json``: the revision, the push's wall time, this process's peak RSS,
and the requests and bytes this rank sent, counted on the client's own HTTP clients
(the access log cannot tell the ranks apart).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist


def main() -> int:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    base = Path(os.environ["BASE"])
    import huggingface_hub.utils._http as http

    import ckpt_action as ckpt

    sent = {"requests": 0, "bytes": 0}

    def on_request(request: Any) -> None:
        sent["requests"] += 1
        sent["bytes"] += int(request.headers.get("content-length") or 0)

    # ckpt-action uses the client the factory in place makes (hub/transport.py): count there.
    def counting_client() -> Any:
        client = http.default_client_factory()
        client.event_hooks = {"request": [on_request], "response": []}
        return client

    http.set_client_factory(counting_client)
    dist.barrier()  # the timing starts when every rank is up
    started = time.perf_counter()
    handle = ckpt.push(base / f"rank-{rank}", os.environ["REPO"], step=int(os.environ["STEP"]), distributed=True)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    (base / f"result-{rank}.json").write_text(json.dumps({"revision": handle.revision, "seconds": seconds,
                                                           "peak_rss": peak, **sent}))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
