"""Section 13: what pushing costs the training step: no pushes, the Trainer callback, ``watch``.

One training (``bench/steptime_train.py``: a GPT-2 from a config, the real Trainer, CPU, a
fixed number of steps, a checkpoint every K steps) run three ways side by side, in
alternating order: without pushes, with ``CheckpointCallback`` (pushes in its upload
process), and under ``ckpt-action watch -- python train.py``. Reported: each one's mean
step time against no pushes (the goal is at most 5% slower on this 2-core machine) and,
for each save, the seconds from the save completing to its checkpoint pinned on the Hub
(the callback stamps its pushes; watch's ``pushed checkpoint-N`` lines are stamped as they
are read). The local Hub runs on the same cores, at the idle CPU policy while the trainings
run (a real Hub is elsewhere and takes none of them; at the usual policy its CPU, more than the
client's, came out of the training's cores), and its CPU time during each run is reported.
Each mean step is split (Linux schedstat) into the training thread's CPU time, its wait for a
core, and the time it was blocked in its own process: what the callback could cost it in-process
(the GIL, a synchronous wait) shows in the last, whatever else runs on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from .context import Context
from .hubproc import REPO_ROOT
from .report import Section, fmt_s
from .timing import PY_CLI, median

SCRIPT = REPO_ROOT / "bench" / "steptime_train.py"
GOAL = 1.05
PUSHED_LINE = re.compile(r"pushed (checkpoint-\d+)")
# (steps, every, n_embd, n_layer): a 256 MiB checkpoint (weights and Adam's two moments), or a small one.
FULL = (120, 30, 768, 3)
QUICK = (8, 4, 96, 1)


def _hub_cpu_seconds(ctx: Context) -> float:
    """The local Hub process's CPU time so far (user + system): on this machine it competes with
    the training for the same cores, as a real Hub elsewhere would not."""
    proc = ctx.hub.proc
    try:
        with open(f"/proc/{proc.pid if proc else 0}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _hub_threads(ctx: Context) -> list[int]:
    proc = ctx.hub.proc
    where = f"/proc/{proc.pid if proc else 0}/task"
    return [int(t) for t in os.listdir(where)] if proc and os.path.isdir(where) else []


def _set_policy(tids: list[int], policy: int) -> bool:
    done = bool(tids)
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except OSError:
            done = False
    return done


@contextlib.contextmanager
def _hub_at_idle_policy(ctx: Context) -> Iterator[bool]:
    """The local Hub's threads at the idle CPU policy while the trainings run (the threads it
    starts meanwhile inherit it), then back: on this machine it stands in for a Hub elsewhere,
    and at the usual policy its CPU (receiving, hashing and storing every checkpoint, more
    than the client's work) came out of the cores the training keeps busy. Yields whether it
    could be set (Linux)."""
    idle = hasattr(os, "SCHED_IDLE") and _set_policy(_hub_threads(ctx), os.SCHED_IDLE)
    try:
        yield idle
    finally:
        if idle:
            _set_policy(_hub_threads(ctx), os.SCHED_OTHER)


def _train(ctx: Context, way: str, rep: int) -> dict:
    steps, every, embd, layers = QUICK if ctx.quick else FULL
    out = ctx.work / f"steptime-{way}-{rep}"
    shutil.rmtree(out, ignore_errors=True)
    result = ctx.work / f"steptime-{way}-{rep}.json"
    repo = f"bench/steptime-{way}-{rep}"
    train = [sys.executable, str(SCRIPT), str(out), str(result), str(steps), str(every), str(embd), str(layers),
             "callback" if way == "callback" else "none", str(rep * 10 + ["none", "callback", "watch"].index(way)),
             repo]
    env = ctx.env()
    landed: dict[str, float] = {}
    hub_cpu = _hub_cpu_seconds(ctx)
    started = time.perf_counter()
    if way == "watch":
        cmd = [*PY_CLI, "watch", "--repo", repo, "--local-dir", str(out), "--", *train]
        proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        assert proc.stderr is not None
        lines: list[str] = []

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                found = PUSHED_LINE.search(line)
                if found and found.group(1) not in landed:
                    landed[found.group(1)] = time.time()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        code = proc.wait(timeout=1800)
        reader.join(10)
        if code != 0:
            raise RuntimeError(f"watch exited {code}: {''.join(lines)[-2000:]}")
    else:
        done = subprocess.run(train, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"training ({way}) exited {done.returncode}: {done.stderr[-2000:]}")
    whole = time.perf_counter() - started
    doc = json.loads(result.read_text())
    doc["landed"] = doc["landed"] or landed
    doc["whole_seconds"] = whole
    doc["hub_cpu_seconds"] = _hub_cpu_seconds(ctx) - hub_cpu
    shutil.rmtree(out, ignore_errors=True)
    return doc


def run_section(ctx: Context) -> Section:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        sec = Section(13, "step time while pushing")
        sec.skipped = f"needs the transformers extra ({exc})"
        return sec
    ways = ["none", "callback", "watch"]
    reps = 1 if ctx.quick else 4  # the machine drifts by more than the 5% goal between runs: 4 each, alternating
    runs: dict[str, list[dict]] = {w: [] for w in ways}
    with _hub_at_idle_policy(ctx) as hub_idle:
        for rep in range(reps):
            for way in (ways if rep % 2 == 0 else list(reversed(ways))):
                runs[way].append(_train(ctx, way, rep))
    steps, every, _embd, _layers = QUICK if ctx.quick else FULL
    size = runs["none"][0]["checkpoint_bytes"]
    sec = Section(13, f"step time while pushing: {steps} Trainer steps on CPU, a {size / 2**20:.0f} MiB checkpoint"
                      f" every {every}")
    per_run = {w: [sum(r["steps"]) / len(r["steps"]) for r in rs] for w, rs in runs.items()}
    mean_step = {w: median(values) for w, values in per_run.items()}
    train_s = {w: median([r["train_seconds"] for r in rs]) for w, rs in runs.items()}
    hub_cpu = {w: median([r["hub_cpu_seconds"] for r in rs]) for w, rs in runs.items()}
    # Where a step's time went, per way: the training thread's own CPU, its wait for a core,
    # and the rest, blocked in its own process (the GIL, a lock, a wait on the pushes).
    split = {w: {"cpu": median([sum(r["cpu"]) / len(r["cpu"]) for r in rs]),
                 "waiting_for_a_core": median([sum(r["waiting"]) / len(r["waiting"]) for r in rs if r["waiting"]]),
                 "blocked_in_process": median([max(0.0, sum(r["steps"]) - sum(r["cpu"]) - sum(r["waiting"]))
                                               / len(r["steps"]) for r in rs if r["waiting"]])}
             for w, rs in runs.items()}
    lags: dict[str, list[float]] = {}
    for way in ("callback", "watch"):
        lags[way] = [r["landed"][name] - r["saves"][name] for r in runs[way] for name in r["saves"]
                     if name in r["landed"]]
        pushed = [sorted(r["landed"]) == sorted(r["saves"]) for r in runs[way]]
        sec.check(f"{way}: every save pinned on the Hub", all(pushed),
                  f"{[len(r['landed']) for r in runs[way]]} of {[len(r['saves']) for r in runs[way]]}")
    for way in ways:
        slow = mean_step[way] / mean_step["none"]
        text = (f"mean step {fmt_s(mean_step[way])} ({fmt_s(split[way]['cpu'])} on a core,"
                f" {fmt_s(split[way]['waiting_for_a_core'])} waiting for one,"
                f" {fmt_s(split[way]['blocked_in_process'])} blocked in the process), train() {fmt_s(train_s[way])},"
                f" local Hub CPU {fmt_s(hub_cpu[way])}"
                + ("" if way == "none" else f", {slow:.3f}x the step time of no pushes;"
                   f" save to pinned on the Hub: median {fmt_s(median(lags[way]))}, max {fmt_s(max(lags[way]))}"
                   if lags[way] else ""))
        sec.row({"none": "no pushes", "callback": "CheckpointCallback (upload process)",
                 "watch": "ckpt-action watch -- python train.py"}[way], text)
    for way in ("callback", "watch"):
        slow = mean_step[way] / mean_step["none"]
        sec.target(f"{way}: step time at most {GOAL:.2f}x no pushes", f"{slow:.3f}x", slow <= GOAL)
    sec.row("each run's mean step (the spread the medians are taken over)",
            "; ".join(f"{w}: {', '.join(fmt_s(v) for v in per_run[w])}" for w in ways))
    sec.row("the local Hub (on the same cores)", "at the idle CPU policy while the trainings ran, as a Hub elsewhere"
            " takes none of them" if hub_idle else "at the usual CPU policy (the idle one could not be set)")
    sec.data = {"steps": steps, "every": every, "checkpoint_bytes": size, "repetitions": reps, "hub_idle": hub_idle,
                "mean_step_seconds_per_run": per_run,
                "mean_step_seconds": mean_step, "step_split_seconds": split, "train_seconds": train_s,
                "slowdown": {w: round(mean_step[w] / mean_step["none"], 4) for w in ways},
                "save_to_pinned_seconds": lags,
                "local_hub_cpu_seconds": hub_cpu}
    return sec
