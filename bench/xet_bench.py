"""Section 9: Xet against plain LFS, with the hf CLI on both paths of the same local Hub.

Dedupe: ``hf upload`` (and ``ckpt-action push``, as the next checkpoint) of a checkpoint
folder (a big file and two small ones) N, then of N+1 (the same bytes with a contiguous
10% in the middle rewritten) from a fresh ``HF_HOME`` and Xet cache, so only the
server's dedupe answers can spare bytes. Bytes sent are the request bodies the local Hub
received for the N+1 push (its access log, every listener). Throughput: the push of N
and the download of N+1 into a fresh dir, for ``hf`` and ckpt-action, each tool and path
on a fresh Hub (the stores are content-addressed, so a second upload of the same bytes
would be skipped). Reads: the push of N runs under ``bench.readcount``, which reports
the bytes the process read (``rchar``, hf_xet's threads included); over the bytes of the
checkpoint, that is how many times each byte was read."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from .context import Context
from .fixtures import SMALL_FILES
from .hubproc import HubProcess, Requests
from .report import Section, fmt_rate, fmt_s
from .timing import HF_CLI, PY_CLI, median, ratio, run

REPO = "bench/xet"
# Quick mode stays above the manifest's GIT_OID_LIMIT, so its big file takes
# push's one-read path as a real checkpoint's weights do.
FULL_MIB, QUICK_MIB = 256, 24
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


def _counted(cmd: list[str], out: Path) -> list[str]:
    """``cmd`` (an ``hf`` or ``PY_CLI`` command) run under bench.readcount, writing to ``out``."""
    script, args = (HF_CLI, cmd[1:]) if cmd[0] == "hf" else (cmd[1], cmd[2:])
    return [sys.executable, "-m", "bench.readcount", str(out), script, *args]


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
    sec = Section(9, f"Xet and plain LFS: an N+1 push with {CHANGED:.0%} of a {size >> 20} MiB file changed, "
                  "and throughput (hf CLI and ckpt-action)")
    sent: dict[str, int] = {}
    payload: dict[str, int] = {}
    batch_calls: dict[str, int] = {}
    runs = [(tool, path) for tool in ("hf", "ckpt-action") for path in ("xet", "lfs")]
    push_s: dict[str, list[float]] = {f"{t} {p}": [] for t, p in runs}
    pull_s: dict[str, list[float]] = {f"{t} {p}": [] for t, p in runs}
    dirs = {}
    for step, file in ((1, n), (2, n1)):
        dirs[step] = base / f"checkpoint-{step}"
        dirs[step].mkdir()
        os.link(file, dirs[step] / "model.safetensors")
        for name, data in SMALL_FILES.items():
            (dirs[step] / name).write_bytes(data)
    checkpoint_bytes = size + sum(map(len, SMALL_FILES.values()))
    rchar: dict[str, list[int]] = {f"{t} {p}": [] for t, p in runs}
    for rep in range(reps):
        for tool, path in (runs if rep % 2 == 0 else list(reversed(runs))):
            key, xet = f"{tool} {path}", path == "xet"
            hub = HubProcess(ctx.work / f"xet-hub-{rep}-{tool}-{path}")
            target = ctx.work / f"xet-pulled-{rep}-{tool}-{path}"
            try:
                ctx.api(hub).create_repo(REPO)
                if tool == "hf":
                    first, second = (["hf", "upload", REPO, str(dirs[s]), f"checkpoint-{s}"] for s in (1, 2))
                    pull = ["hf", "download", REPO, "checkpoint-2/model.safetensors", "--local-dir", str(target)]
                else:
                    first, second = ([*PY_CLI, "push", "--repo", REPO, "--local-dir", str(dirs[s]),
                                      "--subfolder", f"checkpoint-{s}", "--step", str(s)] for s in (1, 2))
                    pull = [*PY_CLI, "pull", "--repo", REPO, "--subfolder", "checkpoint-2", "--local-dir",
                            str(target)]
                counts = base / f"reads-{rep}-{tool}-{path}.json"
                push_s[key].append(run(_counted(first, counts), _env(ctx, hub, xet)).seconds)
                rchar[key].append(json.loads(counts.read_text())["rchar"])
                hub.mark()
                run(second, _env(ctx, hub, xet))
                step_log = Requests(hub.since_mark())
                sent[key] = step_log.bytes_in
                payload[key] = _cas_up(step_log) if xet else step_log.lfs_bytes_up
                batch_calls[key] = sum(1 for r in step_log.lines if r["path"].endswith("/info/lfs/objects/batch"))
                pull_s[key].append(run(pull, _env(ctx, hub, xet)).seconds)
            finally:
                shutil.rmtree(target, ignore_errors=True)
                hub.stop(remove=True)
    shutil.rmtree(base, ignore_errors=True)
    for key in push_s:
        tool, path = key.split()
        what = "xorbs and shards" if path == "xet" else "LFS PUTs"
        sec.row(f"N+1 push, {key}: bytes sent", f"{sent[key]:,} ({sent[key] / size:.1%} of the file; "
                f"{payload[key]:,} in {what})")
    reads = {key: round(max(rchar[key]) / checkpoint_bytes, 3) for key in rchar}
    for key in push_s:
        sec.row(f"push of N, {key}: reads of each byte", f"{reads[key]:.2f} ({max(rchar[key]):,} bytes read for a "
                f"{checkpoint_bytes:,}-byte checkpoint)")
    for tool in ("hf", "ckpt-action"):
        sec.row(f"N+1 push bytes, Xet / LFS, {tool}", f"{sent[f'{tool} xet'] / sent[f'{tool} lfs']:.3f}x")
    for key in push_s:
        sec.row(f"push of N, {key}", f"median {fmt_s(median(push_s[key]))} = {fmt_rate(size, median(push_s[key]))}")
        sec.row(f"pull of N+1, {key}", f"median {fmt_s(median(pull_s[key]))} = {fmt_rate(size, median(pull_s[key]))}")
    ratios = {}
    for tool in ("hf", "ckpt-action"):
        ratios[tool] = (ratio(median(push_s[f"{tool} lfs"]), median(push_s[f"{tool} xet"])),
                        ratio(median(pull_s[f"{tool} lfs"]), median(pull_s[f"{tool} xet"])))
        sec.row(f"throughput Xet / LFS, {tool}", f"push {ratios[tool][0]}x, pull {ratios[tool][1]}x")
    for path in ("xet", "lfs"):
        sec.row(f"throughput ckpt-action / hf, {path}",
                f"push {ratio(median(push_s[f'hf {path}']), median(push_s[f'ckpt-action {path}']))}x, "
                f"pull {ratio(median(pull_s[f'hf {path}']), median(pull_s[f'ckpt-action {path}']))}x")
    for tool in ("hf", "ckpt-action"):
        xet_sent = sent[f"{tool} xet"]
        sec.target(f"{tool}: an N+1 push with {CHANGED:.0%} changed sends < 25% of the file on Xet",
                   f"{xet_sent / size:.1%}", xet_sent < size / 4)
        sec.check(f"{tool}: plain LFS sends the whole N+1 file", payload[f"{tool} lfs"] == size,
                  f"{payload[f'{tool} lfs']} == {size}")
        sec.check(f"{tool}: Xet sends less than a quarter of the N+1 file", xet_sent < size / 4,
                  f"{xet_sent} < {size // 4}")
        sec.check(f"{tool}: the Xet push of N reads each byte once (at most 1.1x the checkpoint and 8 MiB)",
                  max(rchar[f"{tool} xet"]) <= 1.1 * checkpoint_bytes + (8 << 20), f"{reads[f'{tool} xet']}x")
        sec.check(f"{tool}: the Xet push made no LFS batch call", batch_calls[f"{tool} xet"] == 0,
                  f"{batch_calls[f'{tool} xet']} calls")
    sec.data = {"file_bytes": size, "changed_fraction": CHANGED, "repetitions": reps, "n1_bytes_sent": sent,
                "n1_payload_bytes": payload,
                "checkpoint_bytes": checkpoint_bytes, "push_rchar": rchar, "push_reads_per_byte": reads,
                "push_seconds": push_s, "pull_seconds": pull_s,
                "throughput_ratio_xet_vs_lfs": ratios}
    return sec
