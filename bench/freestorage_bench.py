"""Section 8: Hub storage after ``prune --free-storage``, against today's prune.

Ten checkpoints (five with ``--quick``: the quick run checks bytes, not scale) of one
never-repeating weights file each are pushed to two twin repos (through the Python API),
one is promoted to ``release/`` with a tag, then each repo is pruned keeping the last two
(plus the promoted source, which prune always keeps): one with ``--free-storage``, one
without. Storage is the Hub's own figure (``usedStorage``); today's prune frees nothing,
since history still names every object. Requests and time are those of the prune process.
"""

from __future__ import annotations

import json

from .context import Context
from .fixtures import write_checkpoint
from .hubproc import Requests
from .report import Section, fmt_s
from .timing import PY_CLI, run

CHECKPOINTS, QUICK_CHECKPOINTS = 10, 5
KEEP_LAST = 2


def _used(ctx: Context, repo: str) -> int:
    used = ctx.api().model_info(repo, expand=["usedStorage"]).used_storage
    assert isinstance(used, int)
    return used


def _fill(ctx: Context, repo: str, mib: int, checkpoints: int) -> None:
    """The checkpoints and the release, through the Python API in this process (the same
    pushes and promote the CLI makes, plain LFS as its processes here; only prune is timed)."""
    import ckpt_action as ckpt

    for step in range(1, checkpoints + 1):
        local = ctx.work / f"free-{repo.replace('/', '-')}-{step}"
        write_checkpoint(local, {"model.safetensors": mib}, salt=100 + step)
        ckpt.push(local, repo, step=step, endpoint=ctx.url, token="hf_bench")
    promoted = checkpoints // 2  # pruned but for the promotion: older than the last KEEP_LAST
    ckpt.promote(repo, "release", subfolder=f"checkpoint-{promoted}", tag="v1", endpoint=ctx.url, token="hf_bench")


def run_section(ctx: Context) -> Section:
    mib = 1 if ctx.quick else 64
    checkpoints = QUICK_CHECKPOINTS if ctx.quick else CHECKPOINTS
    sec = Section(8, f"prune --free-storage: {checkpoints} checkpoints x {mib} MiB, keep the last {KEEP_LAST} "
                     "and one release")
    results = {}
    for repo, extra in (("bench/free-today", []), ("bench/free-storage", ["--free-storage"])):
        _fill(ctx, repo, mib, checkpoints)
        before = _used(ctx, repo)
        ctx.hub.mark()
        done = run([*PY_CLI, "prune", "--repo", repo, "--keep-last", str(KEEP_LAST), *extra, "--json"], ctx.env())
        reqs = Requests(ctx.hub.since_mark())
        after = _used(ctx, repo)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        results[repo] = {"before": before, "after": after, "seconds": done.seconds, "requests": reqs.count,
                         "commits": reqs.commits, "deleted": len(out["deleted"]),
                         "freed_bytes": out.get("freed_bytes")}
    today, freed = results["bench/free-today"], results["bench/free-storage"]
    pruned = freed["deleted"]
    unique = pruned * mib * 2**20  # each pruned checkpoint's weights, held by nothing else
    sec.row("storage before prune", f"{freed['before'] / 2**20:.1f} MiB")
    sec.row("after today's prune", f"{today['after'] / 2**20:.1f} MiB ({fmt_s(today['seconds'])}, "
            f"{today['requests']} requests, {today['commits']} commit)")
    sec.row("after prune --free-storage", f"{freed['after'] / 2**20:.1f} MiB ({fmt_s(freed['seconds'])}, "
            f"{freed['requests']} requests, {freed['commits']} commit)")
    sec.row("freed", f"{(freed['before'] - freed['after']) / 2**20:.1f} MiB of {pruned} pruned checkpoints")
    sec.check("today's prune frees nothing", today["after"] == today["before"],
              f"{today['before']} -> {today['after']} bytes")
    sec.check("--free-storage frees exactly the pruned checkpoints' unique bytes",
              freed["before"] - freed["after"] == unique == freed["freed_bytes"],
              f"{freed['before'] - freed['after']} bytes freed, {unique} expected, {freed['freed_bytes']} reported")
    sec.check("both prunes are one commit", today["commits"] == freed["commits"] == 1,
              f"{today['commits']} and {freed['commits']} commits")
    sec.data = {"checkpoint_mib": mib, "checkpoints": checkpoints, "pruned": pruned, "today": today,
                "free_storage": freed, "unique_bytes": unique}
    return sec
