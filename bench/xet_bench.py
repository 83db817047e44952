"""Section 8: Xet against plain LFS, with the hf CLI on both paths of the same local Hub.

Dedupe: ``hf upload`` of a big file N, then of N+1 (the same bytes with a contiguous 10%
in the middle rewritten) from a fresh ``HF_HOME`` and Xet cache, so only the server's
dedupe answers can spare bytes. Bytes sent are the request bodies the local Hub received
for the N+1 push (its access log, every listener). Throughput: ``hf upload`` of N and
``hf download`` of N+1 into a fresh dir, each path on a fresh Hub (the stores are
content-addressed, so a second upload of the same bytes would be skipped).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .context import Context
from .hubproc import HubProcess, Requests
from .report import Section, fmt_rate, fmt_s
from .timing import median, ratio, run

REPO = "bench/xet"
FULL_MIB, QUICK_MIB = 256, 16
CHANGED = 0.10


def _write(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        left = size
        while left:
            n = min(left, 8 << 20)
            fh.write(os.urandom(n))
            left -= n


def _n_plus_1(src: Path, dst: Path, size: int) -> None:
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as fh:
        fh.seek(size // 2 - int(size * CHANGED) // 2)
        fh.write(os.urandom(int(size * CHANGED)))


def _env(ctx: Context, hub: HubProcess, xet: bool) -> dict[str, str]:
    env = ctx.env(hub)
    if xet:
        env.pop("HF_HUB_DISABLE_XET", None)
        env["HF_XET_CACHE"] = str(Path(env["HF_HOME"]) / "xet")
    return env


def _cas_up(req: Requests) -> int:
    return sum(int(r["bytes_in"]) for r in req.lines if r["listener"] == "cas" and r["method"] == "POST"
               and r["path"].startswith(("/v1/xorbs/", "/v1/shards")))


def run_section(ctx: Context) -> Section:
    size = (QUICK_MIB if ctx.quick else FULL_MIB) * 2**20
    reps = 1 if ctx.quick else 2
    base = ctx.work / "xet-data"
    base.mkdir(parents=True, exist_ok=True)
    n, n1 = base / "n.bin", base / "n1.bin"
    _write(n, size)
    _n_plus_1(n, n1, size)
    sec = Section(8, f"Xet and plain LFS: an N+1 push with {CHANGED:.0%} of a {size >> 20} MiB file changed, "
                  "and throughput (hf CLI)")
    sent: dict[str, int] = {}
    payload: dict[str, int] = {}
    batch_calls: dict[str, int] = {}
    push_s: dict[str, list[float]] = {"xet": [], "lfs": []}
    pull_s: dict[str, list[float]] = {"xet": [], "lfs": []}
    for rep in range(reps):
        for path in (("xet", "lfs") if rep % 2 == 0 else ("lfs", "xet")):
            xet = path == "xet"
            hub = HubProcess(ctx.work / f"xet-hub-{rep}-{path}")
            try:
                ctx.api(hub).create_repo(REPO)
                push_s[path].append(run(["hf", "upload", REPO, str(n), "n.bin"], _env(ctx, hub, xet)).seconds)
                hub.mark()
                run(["hf", "upload", REPO, str(n1), "n1.bin"], _env(ctx, hub, xet))
                step = hub.since_mark()
                sent[path] = step.bytes_in
                payload[path] = _cas_up(step) if xet else step.lfs_bytes_up
                batch_calls[path] = sum(1 for r in step.lines if r["path"].endswith("/info/lfs/objects/batch"))
                target = ctx.work / f"xet-pulled-{rep}-{path}"
                pull_s[path].append(run(["hf", "download", REPO, "n1.bin", "--local-dir", str(target)],
                                        _env(ctx, hub, xet)).seconds)
                shutil.rmtree(target, ignore_errors=True)
            finally:
                hub.stop(remove=True)
    shutil.rmtree(base, ignore_errors=True)
    for path, label in (("xet", "Xet (hf_xet)"), ("lfs", "plain LFS (HF_HUB_DISABLE_XET=1)")):
        sec.row(f"N+1 push, {label}: bytes sent", f"{sent[path]:,} ({sent[path] / size:.1%} of the file; "
                f"{payload[path]:,} in {'xorbs and shards' if path == 'xet' else 'LFS PUTs'})")
    sec.row("N+1 push bytes, Xet / LFS", f"{sent['xet'] / sent['lfs']:.3f}x")
    for path in ("xet", "lfs"):
        sec.row(f"hf upload of N, {path}", f"median {fmt_s(median(push_s[path]))} = "
                f"{fmt_rate(size, median(push_s[path]))}")
        sec.row(f"hf download of N+1, {path}", f"median {fmt_s(median(pull_s[path]))} = "
                f"{fmt_rate(size, median(pull_s[path]))}")
    push_ratio = ratio(median(push_s["lfs"]), median(push_s["xet"]))
    pull_ratio = ratio(median(pull_s["lfs"]), median(pull_s["xet"]))
    sec.row("throughput, Xet / LFS", f"push {push_ratio}x, pull {pull_ratio}x")
    sec.target(f"an N+1 push with {CHANGED:.0%} changed sends < 25% of the file on Xet",
               f"{sent['xet'] / size:.1%}", sent["xet"] < size / 4)
    sec.check("plain LFS sends the whole N+1 file", payload["lfs"] == size, f"{payload['lfs']} == {size}")
    sec.check("Xet sends less than a quarter of the N+1 file", sent["xet"] < size / 4, f"{sent['xet']} < {size // 4}")
    sec.check("the Xet push made no LFS batch call", batch_calls["xet"] == 0, f"{batch_calls['xet']} calls")
    sec.data = {"file_bytes": size, "changed_fraction": CHANGED, "repetitions": reps, "n1_bytes_sent": sent,
                "n1_payload_bytes": payload, "push_seconds": push_s, "pull_seconds": pull_s,
                "push_ratio_xet_vs_lfs": push_ratio, "pull_ratio_xet_vs_lfs": pull_ratio}
    return sec
