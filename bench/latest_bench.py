"""Section 1: ``latest`` on a repo of many ``checkpoint-N`` folders, requests and time.

Compared with the seed's approach (every file listed recursively, then the head read)
and with listing through the ``hf`` CLI. Requests come from the server's access log.
Timed twice: the call alone in this process (what the approach costs), and as whole
processes (what a CI step pays, interpreter start included).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from .context import Context
from .fixtures import FILES_PER_FOLDER, build_many_folders
from .hubproc import Requests
from .report import Section, fmt_s
from .seed_baseline import find_latest
from .timing import PY_CLI, median, ratio, run

# The current design: the default branch's top-level tree by name (its folder ids), then the
# candidate's manifest, whose answer names the commit and whose files recompute the folder's
# id. This is the regression guard the quick run asserts (exactly, so a lost fast path shows).
DESIGN_REQUESTS = 2
TREE_PAGE = 1000  # entries per /tree page with expand=false, on the Hub and the local Hub


def _timed(ctx: Context, fn: Callable[[], Any]) -> tuple[float, Requests, Any]:
    ctx.hub.mark()
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    return seconds, Requests(ctx.hub.since_mark()), value


def run_section(ctx: Context) -> Section:
    from ckpt_action.ops.discover import latest
    from ckpt_action.stores import open_store

    folders = 100 if ctx.quick else 1000  # quick: still more files than one page of a recursive listing
    reps = 1 if ctx.quick else 5  # quick: the counts are exact from one run; times are report-only
    repo = f"bench/latest-{folders}"
    sec = Section(1, f"latest on {folders} checkpoint-N folders x {FILES_PER_FOLDER} files")
    api = ctx.api()
    started = time.perf_counter()
    ctx.hub.mark()
    build_commits = build_many_folders(api, repo, folders)
    build = Requests(ctx.hub.since_mark())
    sec.row("build the repo (real client, few big commits)",
            f"{fmt_s(time.perf_counter() - started)}, {build_commits} commits, {build.count} requests")
    want = f"checkpoint-{100 * folders}"
    files = folders * FILES_PER_FOLDER + 1  # + .gitattributes

    # One client per approach, warmed by an untimed call: the one-off setup (the HTTP
    # client, its TLS context) is the same for every approach and a process pays it once.
    ours, seed = open_store(ctx.settings(), repo), ctx.api()
    approaches: dict[str, Callable[[], Any]] = {
        "ckpt-action latest": lambda: latest(ours).handle.subfolder,
        "seed baseline": lambda: find_latest(seed, repo)[0],
    }
    for fn in approaches.values():
        fn()
    calls: dict[str, list[float]] = {k: [] for k in approaches}
    counts: dict[str, Requests] = {}
    for rep in range(reps):
        order = list(approaches) if rep % 2 == 0 else list(reversed(approaches))
        for name in order:
            seconds, reqs, found = _timed(ctx, approaches[name])
            if found != want:
                raise AssertionError(f"{name} found {found}, expected {want}")
            calls[name].append(seconds)
            counts[name] = reqs

    processes: dict[str, list[str]] = {
        "ckpt-action latest": [*PY_CLI, "latest", "--repo", repo, "--json"],
        "seed baseline": [PY_CLI[0], "-m", "bench.seed_baseline", repo],
        "hf models ls (top level)": ["hf", "models", "ls", repo, "--format", "json"],
        "hf models ls -R (every file)": ["hf", "models", "ls", repo, "-R", "--format", "json"],
    }
    wall: dict[str, list[float]] = {k: [] for k in processes}
    pcounts: dict[str, Requests] = {}
    for rep in range(reps):
        order = list(processes) if rep % 2 == 0 else list(reversed(processes))
        for name in order:
            ctx.hub.mark()
            wall[name].append(run(processes[name], ctx.env()).seconds)
            pcounts[name] = Requests(ctx.hub.since_mark())

    base_call = median(calls["seed baseline"])
    for name, times in calls.items():
        r = counts[name]
        sec.row(f"call: {name}", f"{r.count} requests, median {fmt_s(median(times))}, "
                f"{ratio(base_call, median(times))}x vs baseline")
    base_wall = median(wall["seed baseline"])
    for name, times in wall.items():
        r = pcounts[name]
        tele = f" (+{r.telemetry} telemetry)" if r.telemetry else ""
        sec.row(f"process: {name}", f"{r.count} requests{tele}, median {fmt_s(median(times))}, "
                f"{ratio(base_wall, median(times))}x vs baseline")
    sec.row("requests made by ckpt-action latest", " + ".join(counts["ckpt-action latest"].summary()))

    ours_count = counts["ckpt-action latest"].count
    ours_proc = pcounts["ckpt-action latest"]
    speed_call = ratio(base_call, median(calls["ckpt-action latest"])) or 0.0
    speed_wall = ratio(base_wall, median(wall["ckpt-action latest"])) or 0.0
    top_pages = math.ceil((folders + 1) / TREE_PAGE)  # folders + .gitattributes at the top level
    sec.target("at most 2 requests", f"{ours_count} requests", ours_count <= 2)
    thousands = max(1, math.ceil(folders / 1000))
    sec.target(f"at most 3 requests at 1,000 checkpoints, + 1 per further 1,000 (here {2 + thousands})",
               f"{ours_count} requests", ours_count <= 2 + thousands)
    sec.target(">= 10x faster than the baseline (the call)", f"{speed_call}x", speed_call >= 10)
    sec.target(">= 10x faster than the baseline (whole process)", f"{speed_wall}x", speed_wall >= 10)

    sec.check("latest requests (call) = top-level pages + manifest",
              ours_count == DESIGN_REQUESTS + top_pages - 1, f"{ours_count} == {DESIGN_REQUESTS + top_pages - 1}")
    sec.check("latest requests (process) equal the call's, no telemetry", ours_proc.count == ours_count
              and ours_proc.telemetry == 0, f"{ours_proc.count} requests, {ours_proc.telemetry} telemetry")
    # A recursive listing holds the folders too, not only the files.
    base_expected = math.ceil((files + folders) / TREE_PAGE) + 1
    sec.check("baseline requests = recursive pages + repo_info", counts["seed baseline"].count == base_expected,
              f"{counts['seed baseline'].count} == {base_expected}")
    sec.data = {
        "folders": folders, "files": files, "repetitions": reps, "build_commits": build_commits,
        "latest_requests": ours_count,
        "latest_request_budget": DESIGN_REQUESTS + top_pages - 1, "baseline_expected_requests": base_expected,
        "latest_request_paths": counts["ckpt-action latest"].summary(),
        "process_requests": {k: v.count for k, v in pcounts.items()},
        "process_telemetry_requests": {k: v.telemetry for k, v in pcounts.items()},
        "call_requests": {k: v.count for k, v in counts.items()},
        "call_seconds_median": {k: median(v) for k, v in calls.items()},
        "call_seconds_all": calls,
        "process_seconds_median": {k: median(v) for k, v in wall.items()},
        "process_seconds_all": wall,
        "speedup_call": speed_call, "speedup_process": speed_wall,
    }
    return sec
