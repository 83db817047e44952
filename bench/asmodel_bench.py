"""Section 15: promote --as-model, against doing it by hand; DCP consolidation against the disk.

A Trainer-shaped checkpoint (weights a third of it, the optimizer the rest) promoted
``--as-model`` copies the kept files on the server: no checkpoint byte goes up. By hand it
is ``hf download`` of the model's files then ``hf upload`` of them. A DCP checkpoint's
consolidation is timed in a child process (its peak RSS is the memory figure) against
the disk's own read and write rates for the same bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .context import Context
from .hubproc import Requests
from .report import Section, fmt_s
from .timing import PY_CLI, ratio, run

CONSOLIDATE = """
import json, resource, sys, time
from pathlib import Path
from ckpt_action.checkpoint.consolidate import consolidate_dcp
t = time.perf_counter()
res = consolidate_dcp(Path(sys.argv[1]), Path(sys.argv[2]), max_shard_size=int(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - t, "files": res.files, "bytes": res.total_size,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
SAVE_DCP = """
import sys, torch, warnings, torch.distributed.checkpoint as dcp
warnings.simplefilter("ignore")
total, n = int(sys.argv[2]), 8
state = {f"layer{i}.weight": torch.randn(total // (4 * n) // 1024, 1024) for i in range(n)}
dcp.save(state, checkpoint_id=sys.argv[1])
"""


def _trainer_checkpoint(where: Path, total: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    where.mkdir(parents=True, exist_ok=True)
    weights = total // 3
    rng = np.random.default_rng(0)
    save_file({"w": rng.integers(0, 255, weights, dtype=np.uint8)}, str(where / "model.safetensors"))
    with open(where / "optimizer.pt", "wb") as fh:
        left = total - weights
        while left > 0:
            n = min(left, 64 << 20)
            fh.write(os.urandom(n))
            left -= n
    (where / "config.json").write_text('{"model_type": "gpt2"}')
    (where / "generation_config.json").write_text("{}")
    (where / "trainer_state.json").write_text("{}")
    for name in ("scheduler.pt", "rng_state.pth", "training_args.bin"):
        (where / name).write_bytes(os.urandom(1024))


def _disk_rates(path: Path, size: int) -> tuple[float, float]:
    """Bytes per second this disk writes (fsynced) and reads (page cache dropped where we may)."""
    probe = path / "disk-probe"
    block = os.urandom(8 << 20)
    t = time.perf_counter()
    with open(probe, "wb") as fh:
        for _ in range(max(1, size // len(block))):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    write = size / (time.perf_counter() - t)
    fd = os.open(probe, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    t = time.perf_counter()
    while os.read(fd, 8 << 20):
        pass
    read = size / (time.perf_counter() - t)
    os.close(fd)
    probe.unlink()
    return write, read


def run_section(ctx: Context) -> Section:
    total = (192 << 20) if ctx.quick else (2 << 30)
    sec = Section(15, f"promote --as-model of a {total / 2**30:.2f} GiB Trainer checkpoint; DCP consolidation")
    try:  # the Trainer checkpoint is written with numpy and safetensors, which the transformers extra brings
        import numpy  # noqa: F401
        import safetensors.numpy  # noqa: F401
    except ImportError as exc:
        sec.skipped = f"needs the transformers extra ({exc})"
        return sec
    src = ctx.work / "asmodel-trainer" / "checkpoint-100"
    _trainer_checkpoint(src, total)
    env = ctx.env()
    repo = "bench/asmodel"
    run([*PY_CLI, "push", "--repo", repo, "--local-dir", str(src), "--step", "100"], env)
    ctx.hub.mark()
    ours = run([*PY_CLI, "promote", "--repo", repo, "--subfolder", "checkpoint-100", "--as-model", "--to", "release",
                "--json"], ctx.env())
    reqs = Requests(ctx.hub.since_mark())
    sec.row("promote --as-model", f"{fmt_s(ours.seconds)}, {reqs.lfs_bytes_up} LFS bytes up, {reqs.commits} commit(s)")
    target = ctx.work / "asmodel-by-hand"
    ctx.hub.mark()
    kept = ["model.safetensors", "config.json", "generation_config.json"]
    down = run(["hf", "download", repo, *[f"checkpoint-100/{k}" for k in kept], "--local-dir", str(target)], ctx.env())
    up = run(["hf", "upload", repo, str(target / "checkpoint-100"), "release-by-hand"], ctx.env())
    hand = Requests(ctx.hub.since_mark())
    by_hand = down.seconds + up.seconds
    sec.row("hf download (kept files) + hf upload", f"{fmt_s(by_hand)} ({fmt_s(down.seconds)} + {fmt_s(up.seconds)}),"
            f" {hand.lfs_bytes_up} LFS bytes up, {hand.bytes_out} bytes received")
    sec.row("speed-up", f"{ratio(by_hand, ours.seconds)}x")
    sec.check("promote --as-model sends 0 LFS bytes", reqs.lfs_bytes_up == 0, f"{reqs.lfs_bytes_up} bytes")
    sec.check("promote --as-model is one commit", reqs.commits == 1, f"{reqs.commits} commits")

    dcp_size = total // 3
    dcp_src = ctx.work / "asmodel-dcp"
    subprocess.run([sys.executable, "-c", SAVE_DCP, str(dcp_src), str(dcp_size)], check=True, env=env,
                   capture_output=True)
    shard = max(1, dcp_size // 3)
    proc = subprocess.run([sys.executable, "-c", CONSOLIDATE, str(dcp_src), str(ctx.work / "asmodel-dcp-out"),
                           str(shard)], check=True, env=env, capture_output=True, text=True)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    write, read = _disk_rates(ctx.work, got["bytes"])
    rate = got["bytes"] / got["seconds"]
    sec.row("DCP consolidation", f"{got['bytes'] / 2**20:.0f} MiB in {fmt_s(got['seconds'])}: {rate / 2**20:.0f} MiB/s"
            f" read and written, {len(got['files'])} files, peak RSS {got['peak_rss'] / 2**20:.0f} MiB"
            f" (max shard {shard / 2**20:.0f} MiB)")
    sec.row("this disk", f"write {write / 2**20:.0f} MiB/s (fsynced), read {read / 2**20:.0f} MiB/s")
    sec.data = {"bytes": total, "promote_seconds": ours.seconds, "promote_lfs_bytes": reqs.lfs_bytes_up,
                "by_hand_seconds": by_hand, "by_hand_lfs_bytes": hand.lfs_bytes_up, "dcp": got,
                "disk_write": write, "disk_read": read}
    return sec
