"""Section 16: a push killed part-way and run again, and a checkpoint made durable after SIGTERM.

**Re-sent after a kill.** A push of a checkpoint (2 GiB in 32 files; ``--quick``: 32 MiB in 8)
is SIGKILLed once 25%, 50% or 90% of its bytes have arrived (read from the local Hub's access
log: the LFS PUTs, or the Xet xorbs, answered 200), then run again with the same arguments;
what the re-run sends beyond the bytes still missing is what the kill cost. For ckpt-action
on a model repo over plain LFS and over Xet and into a Storage Bucket, beside ``hf upload``
(the repo) and ``hf buckets sync`` (the bucket) killed and re-run the same way. Each upload
request is held a little by the Hub's fault injection (``delay_s``), so that the kill lands
near its mark. The bound ckpt-action promises: at most the files in flight
one batch (``CKPT_UPLOAD_BATCH_BYTES`` or the biggest file, times ``CKPT_UPLOAD_CONCURRENCY``
on a repo). ``--quick`` kills at 50% only,
and every run pushes bytes of its own (the Hub keeps every byte it was ever sent).

**What the batches cost a push never killed.** The same bucket push, never killed, in its
default batches against one batch for every file (``CKPT_UPLOAD_BATCH_BYTES`` above the
checkpoint's size: what a push sent before), alternating; the goal is at most 1.05x.

**Time to durable after SIGTERM.** ``ckpt-action watch --grace G -- python trainer.py``,
where the trainer saves a checkpoint (``checkpoint-N/model.bin``, then ``trainer_state.json``
last, as the Trainer marks one complete) every 0.3 to 1.2 s, against a Hub slowed to a fixed
upload rate (each LFS PUT of a file held for its size at that rate); at a random moment, just
after a save completes (so often while the previous one is still being pushed), the bench
sends watch SIGTERM. The newest checkpoint is durable when watch's report names it pushed and
``latest`` then answers it; the time is from the signal to watch's ``pushed checkpoint-N``
line for it (read as it is written); watch's exit comes later, the rest of the grace spent on
older checkpoints, and is reported beside it. Over 20 signals
(``--quick``: 3): "N of N durable, p50 / p95 time to durable", against the deadline G.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .context import Context
from .hubproc import HubProcess
from .report import Section, fmt_s
from .timing import PY_CLI, BenchCommandError, median, run

FRACTIONS = (0.25, 0.5, 0.9)
SLACK = 256 * 1024  # Xet frames each ~64 KiB chunk with a header: not a file's bytes
POLL_S = 0.005
WAIT_S = 600.0  # a bound on a hang, never a pause
PUSHED_LINE = re.compile(r"pushed (checkpoint-\d+)")  # watch's line as each push lands
RERUNS = 3  # re-runs of a killed push before the section gives up on the tool

# Which requests carry a file's bytes, by transfer.
BYTES = {"lfs": ("PUT", "/localhub-lfs/"), "xet": ("POST", "/v1/xorbs/")}


def _env(ctx: Context, xet: bool, hub: HubProcess | None = None, **extra: str) -> dict[str, str]:
    env = ctx.env(hub)
    if xet:
        env.pop("HF_HUB_DISABLE_XET", None)
        env["HF_XET_CACHE"] = str(Path(env["HF_HOME"]) / "xet")
    env.update(extra)
    return env


def _carried(entries: list[dict[str, Any]], transfer: str, *, answered: bool = True) -> int:
    method, part = BYTES[transfer]
    return sum(int(e["bytes_in"]) for e in entries if e["method"] == method and e["path"].startswith(part)
               and (e["status"] == 200 or not answered))


def _checkpoint(root: Path, files: int, size: int, seed: int) -> Path:
    """Bytes no earlier run sent: the Hub (LFS objects, Xet chunks) holds every byte it was
    ever sent, in any repo, and a push of those would send nothing."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(seed)  # noqa: S311 - bench bytes, not a secret
    for i in range(files):
        (root / f"model-{i:05d}-of-{files:05d}.safetensors").write_bytes(rng.randbytes(size))
    return root


def _kill_at(hub: HubProcess, cmd: list[str], env: dict[str, str], transfer: str, total: int,
             fraction: float) -> tuple[int, bool]:
    """Run ``cmd`` and SIGKILL it once ``fraction`` of ``total`` bytes arrived; (bytes that had
    arrived, whether it had ended by itself first)."""
    hub.mark()
    log = hub.access_log
    start = log.stat().st_size
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ended = False
    try:
        deadline = time.monotonic() + WAIT_S
        # Read as it grows (a whole line is written at once): mark/since_mark wait for quiet.
        while _carried(_lines_since(log, start), transfer) < fraction * total:
            if proc.poll() is not None:
                ended = True
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[:3]} never reached {fraction:.0%} of its bytes")
            time.sleep(POLL_S)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return _carried(hub.since_mark(), transfer), ended


def _lines_since(log: Path, start: int) -> list[dict[str, Any]]:
    with open(log, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def _resend(hub: HubProcess, cmd: list[str], env: dict[str, str], transfer: str, total: int,
            fraction: float) -> dict[str, Any]:
    arrived, ended = _kill_at(hub, cmd, env, transfer, total, fraction)
    hub.mark()
    # A re-run that fails is what its user would run again: its bytes count, and it is reported.
    failures: list[str] = []
    while (done := run(cmd, env, check=False)).code != 0:
        failures.append((done.stderr.strip().splitlines() or ["(no output)"])[-1][:300])
        if len(failures) == RERUNS:
            raise BenchCommandError(f"{' '.join(cmd)} failed {RERUNS} re-runs: {failures}")
    sent = _carried(hub.since_mark(), transfer, answered=False)
    missing = max(total - arrived, 0)
    return {"arrived": arrived, "arrived_fraction": round(arrived / total, 3), "resent": sent,
            "missing": missing, "beyond_missing": sent - missing, "ended_before_kill": ended,
            "failed_reruns": failures}


def _resume_rows(ctx: Context, sec: Section, files: int, size: int, batch: int) -> dict[str, Any]:
    total = files * size
    delay = 0.02 if ctx.quick else 0.05
    faults = [{"method": m, "path": "^" + p, "delay_s": delay, "times": -1} for m, p in BYTES.values()]
    out: dict[str, Any] = {}
    runs = 0
    for store, transfer, tool in (("lfs", "lfs", "ckpt-action"), ("lfs", "lfs", "hf"),
                                  ("xet", "xet", "ckpt-action"), ("xet", "xet", "hf"),
                                  ("bucket", "xet", "ckpt-action"), ("bucket", "xet", "hf")):
        # A Hub for each row, removed after it: the Hub keeps every byte it was sent (each run
        # sends bytes of its own), and 18 full-size runs on one would fill the disk.
        hub = HubProcess(ctx.work / f"hub-kill-{store}-{tool}", faults=faults)
        try:
            for fraction in ((0.5,) if ctx.quick else FRACTIONS):
                runs += 1
                src = _checkpoint(ctx.work / "killresume-src", files, size, runs)
                name = f"bench/kill-{store}-{tool}-{int(fraction * 100)}-{runs}"
                env = _env(ctx, transfer == "xet", hub, CKPT_UPLOAD_BATCH_BYTES=str(batch))
                if store == "bucket":
                    uri = f"hf://buckets/{name}"
                    if tool == "hf":
                        ctx.api(hub).create_bucket(name, exist_ok=True)
                    cmd = ([*PY_CLI, "push", "--repo", uri, "--local-dir", str(src), "--subfolder", "checkpoint-1",
                            "--step", "1", "--json"] if tool == "ckpt-action"
                           else ["hf", "buckets", "sync", str(src), f"{uri}/checkpoint-1"])
                else:
                    cmd = ([*PY_CLI, "push", "--repo", name, "--local-dir", str(src), "--subfolder", "checkpoint-1",
                            "--step", "1", "--json"] if tool == "ckpt-action"
                           else ["hf", "upload", name, str(src), "checkpoint-1", "--quiet"])
                    if tool == "hf":
                        ctx.api(hub).create_repo(name, exist_ok=True)
                got = _resend(hub, cmd, env, transfer, total, fraction)
                out.setdefault(f"{tool} {store}", {})[f"{int(fraction * 100)}%"] = got
        finally:
            hub.stop(remove=True)
    bound = {store: max(batch, size) for store in ("lfs", "xet", "bucket")}  # one batch: CKPT_UPLOAD_CONCURRENCY=1
    for key, by_fraction in out.items():
        tool, store = key.split()
        cells = [f"{frac}: {g['beyond_missing'] / 2**20:.1f} MiB (killed at {g['arrived_fraction']:.0%}"
                 + (f"; the re-run failed {len(g['failed_reruns'])}x, then passed: {g['failed_reruns'][0][:80]}"
                    if g["failed_reruns"] else "") + ")"
                 for frac, g in by_fraction.items()]
        sec.row(f"re-sent beyond the missing bytes, {tool} {store}", "; ".join(cells))
        if tool == "ckpt-action":
            failed = [f for g in by_fraction.values() for f in g["failed_reruns"]]
            sec.check(f"ckpt-action {store}: the re-run after a kill succeeds the first time", not failed,
                      "; ".join(failed)[:300] or "ok")
            worst = max(g["beyond_missing"] for g in by_fraction.values())
            sec.check(f"ckpt-action {store}: a re-run sends at most the files in flight beyond the missing bytes",
                      worst <= bound[store] + SLACK, f"{worst} <= {bound[store]} + {SLACK}")
    return {"runs": out, "in_flight_bound": bound, "delay_s": delay}


def _cost_rows(ctx: Context, sec: Section, files: int, size: int, batch: int) -> dict[str, Any]:
    reps = 1 if ctx.quick else 3
    total = files * size
    seconds: dict[str, list[float]] = {"batches": [], "one batch": []}
    for rep in range(reps):
        for mode in (("batches", "one batch") if rep % 2 == 0 else ("one batch", "batches")):
            limit = batch if mode == "batches" else 4 * total
            uri = f"hf://buckets/bench/cost-{mode.replace(' ', '-')}-{rep}"
            src = _checkpoint(ctx.work / "killresume-src", files, size, 1000 + 2 * rep + (mode == "batches"))
            done = run([*PY_CLI, "push", "--repo", uri, "--local-dir", str(src), "--subfolder", "checkpoint-1",
                        "--step", "1", "--json"], _env(ctx, True, CKPT_UPLOAD_BATCH_BYTES=str(limit)))
            seconds[mode].append(done.seconds)
    ratio = median(seconds["batches"]) / median(seconds["one batch"])
    sec.row(f"bucket push never killed: batches of {batch / 2**20:.0f} MiB / one batch",
            f"{ratio:.3f}x (median {fmt_s(median(seconds['batches']))} vs {fmt_s(median(seconds['one batch']))},"
            f" {reps} runs each, alternating)")
    sec.target("a push never killed, in batches, at most 1.05x one batch's time", f"{ratio:.3f}x", ratio <= 1.05)
    return {"seconds": seconds, "ratio": round(ratio, 3)}


TRAINER = '''
import os, random, sys, time
out, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
step = 0
while True:
    step += 1
    d = os.path.join(out, f"checkpoint-{step}")
    os.makedirs(d)
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(rng.randbytes(size))
    with open(os.path.join(d, "trainer_state.json.tmp"), "w") as f:
        f.write('{"global_step": %d}' % step)
    os.rename(os.path.join(d, "trainer_state.json.tmp"), os.path.join(d, "trainer_state.json"))
    time.sleep(rng.uniform(0.3, 1.2))
'''


def _newest_saved(local: Path) -> int:
    steps = [int(p.parent.name.split("-")[1]) for p in local.glob("checkpoint-*/trainer_state.json")]
    return max(steps, default=0)


def _one_signal(ctx: Context, n: int, trainer: Path, size: int, grace: float, rng: random.Random) -> dict[str, Any]:
    """One run of watch signalled just after a save: the seconds from the signal to watch's
    ``pushed checkpoint-N`` line for that newest save (stamped as it is read), and to watch's
    exit (it goes on with older checkpoints in the rest of the grace)."""
    local = ctx.work / f"preempt-{n}"
    repo = f"bench/preempt-{n}"
    env = _env(ctx, False)
    cmd = [*PY_CLI, "watch", "--repo", repo, "--local-dir", str(local), "--grace", str(grace), "--json", "--",
           sys.executable, str(trainer), str(local), str(size), str(n)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    landed: dict[str, float] = {}

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if (found := PUSHED_LINE.search(line)) and found.group(1) not in landed:
                landed[found.group(1)] = time.monotonic()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        time.sleep(rng.uniform(1.0, 4.0))  # a random moment in the run (saves and pushes go on)
        seen = _newest_saved(local)
        deadline = time.monotonic() + WAIT_S
        while (newest := _newest_saved(local)) == seen:  # then just after the next save completes
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"watch ended or hung before a save: {''.join(lines)[-2000:]}")
            time.sleep(POLL_S)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WAIT_S)
        exited = time.monotonic() - signalled
        reader.join(10)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        report = json.loads(stdout)
    except ValueError:
        report = {}
    want = f"checkpoint-{newest}"
    pushed = {p.get("subfolder") for p in report.get("pushed", []) if isinstance(p, dict)}
    found = run([*PY_CLI, "latest", "--repo", repo, "--json"], env, check=False)
    try:
        latest = json.loads(found.stdout).get("subfolder")
    except ValueError:
        latest = None
    durable = want in pushed and latest == want and want in landed
    seconds = max(landed[want] - signalled, 0.0) if want in landed else exited
    return {"newest": want, "seconds": round(seconds, 3), "exited_after": round(exited, 3), "durable": durable,
            "latest": latest, "exit": proc.returncode, "stderr_tail": "".join(lines)[-400:] if not durable else ""}


def _preempt_rows(ctx: Context, sec: Section) -> dict[str, Any]:
    signals = 3 if ctx.quick else 20
    size = 4 * 2**20 if ctx.quick else 32 * 2**20
    rate = 16 * 2**20  # bytes per second the Hub takes each file's bytes at
    grace = 10.0
    trainer = ctx.work / "preempt_trainer.py"
    trainer.write_text(TRAINER)
    ctx.hub.set_faults([{"method": "PUT", "path": "^/localhub-lfs/", "delay_s": size / rate, "times": -1}])
    rng = random.Random(42)  # noqa: S311 - when to signal, not a secret
    trials = []
    try:
        for n in range(signals):
            trials.append(_one_signal(ctx, n, trainer, size, grace, rng))
    finally:
        ctx.hub.set_faults([])
    durable = [t["seconds"] for t in trials if t["durable"]]
    exits = sorted(t["exited_after"] for t in trials)
    ordered = sorted(durable)
    p50 = median(ordered) if ordered else float("nan")
    p95 = ordered[math.ceil(0.95 * len(ordered)) - 1] if ordered else float("nan")  # nearest rank
    in_time = sum(1 for t in trials if t["durable"] and t["seconds"] <= grace)
    sec.row(f"SIGTERM just after a save, {signals} signals, {size / 2**20:.0f} MiB checkpoints at"
            f" {rate / 2**20:.0f} MiB/s, --grace {grace:.0f}",
            f"{len(durable)} of {signals} durable, p50 {fmt_s(p50)} / p95 {fmt_s(p95)} time to durable (the newest"
            f" save's push landed); watch exited after median {fmt_s(median(exits))} (older checkpoints pushed in"
            f" the rest of the grace)")
    sec.target(f"every newest checkpoint durable within --grace {grace:.0f} s", f"{in_time} of {signals}",
               in_time == signals)
    return {"signals": signals, "durable": len(durable), "within_grace": in_time, "grace": grace,
            "checkpoint_bytes": size, "upload_rate": rate, "p50_seconds": p50, "p95_seconds": p95,
            "trials": trials}


def run_section(ctx: Context) -> Section:
    files, size = (8, 4 * 2**20) if ctx.quick else (32, 64 * 2**20)
    batch = 8 * 2**20 if ctx.quick else 512 * 2**20  # quick: two files a batch; full: the default
    total = files * size
    sec = Section(16, f"resume after a kill ({total / 2**30:.2f} GiB, {files} files) and durable after SIGTERM")
    resume = _resume_rows(ctx, sec, files, size, batch)
    cost = _cost_rows(ctx, sec, files, size, batch)
    preempt = _preempt_rows(ctx, sec)
    sec.data = {"bytes": total, "files": files, "file_bytes": size, "batch_bytes": batch, "resume": resume,
                "cost": cost, "preempt": preempt, "python": sys.version.split()[0], "cores": os.cpu_count()}
    return sec
