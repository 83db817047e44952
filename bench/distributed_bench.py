"""Section 10: one checkpoint from four ranks (one torchrun node, gloo), one commit.

Each rank holds one shard (plus a config every rank has); the same shards pushed by one
process from one dir are the baseline, in the same run. Requests and bytes per rank are
counted on each rank's HTTP session and checked against the Hub's access log; the
committing rank's peak memory is measured at two shard sizes with the same file count:
it should follow the number of files, not their bytes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .context import Context
from .hubproc import REPO_ROOT, Requests
from .report import Section, fmt_s
from .timing import PY_CLI, ratio, run

RANKS = 4
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def _shards(root: Path, size: int, one_dir: bool = False) -> None:
    """One shard per rank dir (or all in one dir), fresh random bytes: the Hub's store
    holds none of them already, so every byte is uploaded."""
    block = os.urandom(1 << 20)
    for rank in range(RANKS):
        d = root if one_dir else root / f"rank-{rank}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"model-{rank:05d}-of-{RANKS:05d}.safetensors", "wb") as fh:
            for i in range(size >> 20):
                fh.write(bytes([rank, i & 255]) + block[2:])  # every MiB distinct: no dedup helps
        (d / "config.json").write_text('{"layers": 32}\n')


def _distributed(ctx: Context, root: Path, repo: str, step: int) -> tuple[float, list[dict[str, Any]], Any]:
    env = ctx.env() | {"BASE": str(root), "REPO": repo, "STEP": str(step), "OMP_NUM_THREADS": "1",
                       "CKPT_DISTRIBUTED_TIMEOUT": "600",
                       "PYTHONPATH": str(REPO_ROOT)}
    ctx.hub.mark()
    cmd = [TORCHRUN, "--standalone", "--nproc-per-node", str(RANKS), str(REPO_ROOT / "bench" / "dist_rank.py")]
    proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    reqs = Requests(ctx.hub.since_mark())
    ranks = [json.loads((root / f"result-{r}.json").read_text()) for r in range(RANKS)]
    return max(r["seconds"] for r in ranks), ranks, reqs


def run_section(ctx: Context) -> Section:
    size = (8 if ctx.quick else 256) << 20
    small = 4 << 20
    sec = Section(10, f"a {RANKS}-rank push of {RANKS} x {size >> 20} MiB shards, one commit")
    if importlib.util.find_spec("torch") is None:
        sec.row("not run", "torch is not installed (the [distributed] extra)")
        return sec
    root = ctx.work / "dist"
    _shards(root / "big", size)
    seconds, ranks, reqs = _distributed(ctx, root / "big", "bench/dist", 1)
    revisions = {r["revision"] for r in ranks}
    for rank, r in enumerate(ranks):
        sec.row(f"rank {rank}", f"{r['requests']} requests, {r['bytes'] / 2**20:.1f} MiB sent, "
                f"peak RSS {r['peak_rss'] / 2**20:.0f} MiB")
    # The baseline: one process, one dir holding as many bytes in as many files.
    single = root / "single"
    _shards(single, size, one_dir=True)
    ctx.hub.mark()
    one = run([*PY_CLI, "push", "--repo", "bench/dist-single", "--local-dir", str(single), "--step", "1", "--json"],
              ctx.env())
    one_reqs = Requests(ctx.hub.since_mark())
    sec.row(f"{RANKS} ranks (slowest rank's push)", fmt_s(seconds))
    sec.row("1 process, the same bytes (CLI, end to end)", fmt_s(one.seconds))
    sec.row("time ratio, ranks / one process", f"{ratio(seconds, one.seconds)}")
    # The memory check compares two jobs whose shards differ by far more than its 64 MiB bound: with
    # --quick's 8 MiB shards it could not fail, so the quick run skips the second job.
    small_ranks: list[dict[str, Any]] = []
    if not ctx.quick:
        _shards(root / "small", small)
        _s, small_ranks, _r = _distributed(ctx, root / "small", "bench/dist", 2)
        big_rss, small_rss = ranks[0]["peak_rss"], small_ranks[0]["peak_rss"]
        sec.row("committing rank's peak RSS", f"{big_rss / 2**20:.0f} MiB with {size >> 20} MiB shards, "
                f"{small_rss / 2**20:.0f} MiB with {small >> 20} MiB shards (same files)")
    total = sum(r["requests"] for r in ranks)
    sec.check("one commit", reqs.commits == 1, f"{reqs.commits} commits")
    sec.check("every rank reports the same revision", len(revisions) == 1, f"{sorted(revisions)}")
    logged = len(reqs.lines)
    sec.check("the ranks' requests are the Hub's", total == logged, f"{total} counted, {logged} logged")
    sec.check("each shard's bytes go up once", reqs.lfs_bytes_up == RANKS * size,
              f"{reqs.lfs_bytes_up} bytes for {RANKS * size}")
    sec.check("the one process uploads as many bytes", one_reqs.lfs_bytes_up == RANKS * size,
              f"{one_reqs.lfs_bytes_up} bytes for {RANKS * size}")
    if small_ranks:
        sec.check("rank 0's memory does not follow the shards' bytes", big_rss - small_rss < 64 << 20,
                  f"{(big_rss - small_rss) / 2**20:.0f} MiB more for {(size - small) * RANKS >> 20} MiB more data")
    sec.target(f"{RANKS} ranks no slower than one process", f"ratio {ratio(seconds, one.seconds)}",
               seconds <= one.seconds)
    sec.data = {"shard_bytes": size, "ranks": ranks, "seconds": seconds, "single_seconds": one.seconds,
                "single_requests": one_reqs.count, "commits": reqs.commits, "small_ranks": small_ranks}
    return sec
