"""Section 2: push and pull of one big checkpoint, against ``hf upload`` / ``hf download``.

Every push goes to a fresh local Hub, because the Hub's LFS store is content-addressed:
a second upload of the same bytes to the same server would be skipped and look
infinitely fast. Pulls read the repo ckpt-action pushed, into fresh dirs, with a fresh
HF_HOME. The loopback limit is curl GETting the biggest file from the same server.
Throughput is bytes / whole-process wall time (hashing and interpreter start included).
"""

from __future__ import annotations

import shutil

from .context import Context
from .fixtures import BIG_CHECKPOINT_MIB, QUICK_CHECKPOINT_MIB, write_checkpoint
from .hubproc import HubProcess
from .report import Section, fmt_rate, fmt_s
from .timing import PY_CLI, median, ratio, run

REPO = "bench/transfer"
SUBFOLDER = "checkpoint-1"


def _curl_rate(url: str) -> float:
    """Bytes per second of one plain GET (following the Hub's redirect to its CDN), as curl reports it."""
    out = run(["curl", "-s", "-L", "-o", "/dev/null", "-w", "%{speed_download}", url], {"PATH": "/usr/bin:/bin"})
    return float(out.stdout.strip().replace(",", "."))


def run_section(ctx: Context) -> Section:
    sizes = QUICK_CHECKPOINT_MIB if ctx.quick else BIG_CHECKPOINT_MIB
    reps = 1 if ctx.quick else 4  # ratios swing ±0.2 between single runs here; the median of 4 settles
    src = ctx.work / "big-checkpoint"
    total = write_checkpoint(src, sizes)
    biggest = max(sizes, key=lambda k: sizes[k])
    sec = Section(2, f"push and pull of a {total / 2**30:.2f} GiB checkpoint ({len(sizes) + 2} files)")
    push_s: dict[str, list[float]] = {"ckpt-action push": [], "hf upload": []}
    pull_s: dict[str, list[float]] = {"ckpt-action pull": [], "hf download": []}
    curl: list[float] = []
    lfs_up: dict[str, int] = {}
    peak_rss: list[int] = []
    for rep in range(reps):
        hubs = {name: HubProcess(ctx.work / f"hub-{rep}-{i}") for i, name in enumerate(push_s)}
        try:
            cmds = {
                "ckpt-action push": [*PY_CLI, "push", "--repo", REPO, "--local-dir", str(src),
                                     "--subfolder", SUBFOLDER, "--json"],
                "hf upload": ["hf", "upload", REPO, str(src), SUBFOLDER],
            }
            for name in (list(cmds) if rep % 2 == 0 else list(reversed(cmds))):
                hub = hubs[name]
                hub.mark()
                push_s[name].append(run(cmds[name], ctx.env(hub)).seconds)
                lfs_up[name] = hub.since_mark().lfs_bytes_up
            hub = hubs["ckpt-action push"]
            for name in (list(pull_s) if rep % 2 == 0 else list(reversed(pull_s))):
                target = ctx.work / f"pulled-{rep}-{name.split()[0]}"
                cmd = ([*PY_CLI, "pull", "--repo", REPO, "--subfolder", SUBFOLDER, "--local-dir", str(target)]
                       if name == "ckpt-action pull" else
                       ["hf", "download", REPO, "--include", f"{SUBFOLDER}/*", "--local-dir", str(target)])
                pull_s[name].append(run(cmd, ctx.env(hub)).seconds)
                shutil.rmtree(target, ignore_errors=True)
                curl.append(_curl_rate(f"{hub.url}/{REPO}/resolve/main/{SUBFOLDER}/{biggest}"))
            peak_rss.append(max(h.peak_rss() for h in hubs.values()))
        finally:
            for hub in hubs.values():
                hub.stop(remove=True)
    shutil.rmtree(src, ignore_errors=True)

    limit = median(curl)
    rates = {k: total / median(v) for k, v in (push_s | pull_s).items()}
    for name, times in (push_s | pull_s).items():
        sec.row(name, f"median {fmt_s(median(times))} = {fmt_rate(total, median(times))} "
                f"({ratio(rates[name], limit)}x the loopback limit)")
    sec.row(f"loopback limit: curl GET {biggest}", f"{limit / 1e6:.0f} MB/s (median of {len(curl)})")
    rss = max(peak_rss) if peak_rss else 0
    sec.row("local Hub peak memory (RSS) over the trials", f"{rss / 2**20:.0f} MiB for {total / 2**30:.2f} GiB moved"
            " (streams to and from disk)")
    push_ratio = ratio(rates["ckpt-action push"], rates["hf upload"]) or 0.0
    pull_ratio = ratio(rates["ckpt-action pull"], rates["hf download"]) or 0.0
    sec.row("ckpt-action / hf CLI", f"push {push_ratio}x, pull {pull_ratio}x")
    sec.target("push >= 0.9x hf upload", f"{push_ratio}x", push_ratio >= 0.9)
    sec.target("pull >= 0.9x hf download", f"{pull_ratio}x", pull_ratio >= 0.9)
    sec.target("ratio to the loopback limit (report only)",
               f"push {ratio(rates['ckpt-action push'], limit)}x, pull {ratio(rates['ckpt-action pull'], limit)}x",
               None)
    lfs_total = sum(sizes.values()) * 2**20  # every big file matches the Hub's LFS patterns
    for name, sent in lfs_up.items():
        sec.check(f"{name} sent every LFS byte once", sent == lfs_total, f"{sent} == {lfs_total}")
    sec.data = {"bytes": total, "files": dict(sizes), "repetitions": reps,
                "seconds": push_s | pull_s, "seconds_median": {k: median(v) for k, v in (push_s | pull_s).items()},
                "bytes_per_second": rates, "loopback_bytes_per_second": limit, "curl_all": curl,
                "lfs_bytes_uploaded": lfs_up, "hub_peak_rss_bytes": rss,
                "push_ratio_vs_hf": push_ratio, "pull_ratio_vs_hf": pull_ratio}
    return sec
