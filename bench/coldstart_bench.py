"""Section 5: whole-process start of ``latest``, and proof that wandb stays unimported.

A CI step pays interpreter start plus imports on every call. ``latest`` (including its
requests to a small repo) is timed against the floor any Python tool on huggingface_hub
pays: ``python -c "from huggingface_hub import HfApi"``. ``-X importtime`` lists every
module a command imported; wandb must not be among them unless W&B is asked for.
"""

from __future__ import annotations

import sys

from .context import Context
from .fixtures import build_many_folders, write_checkpoint
from .report import Section, fmt_s
from .timing import PY_CLI, median, ratio, run

REPO = "bench/coldstart"


def _imported(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Module names a process imported (from ``-X importtime``'s stderr)."""
    out = run([sys.executable, "-X", "importtime", *cmd[1:]], env)
    names = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.append(line.rsplit("|", 1)[1].strip())
    return names


def run_section(ctx: Context) -> Section:
    reps = 1 if ctx.quick else 10  # quick: one of each (its times are report-only)
    sec = Section(5, "CLI cold start (whole process)")
    build_many_folders(ctx.api(), REPO, 3)
    cmds = {
        "ckpt-action latest (3 checkpoints)": [*PY_CLI, "latest", "--repo", REPO, "--json"],
        "python -c 'from huggingface_hub import HfApi'": [sys.executable, "-c", "from huggingface_hub import HfApi"],
        "ckpt-action --help": [*PY_CLI, "--help"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for rep in range(reps):
        for name in (list(cmds) if rep % 2 == 0 else list(reversed(cmds))):
            times[name].append(run(cmds[name], ctx.env()).seconds)
    floor = median(times["python -c 'from huggingface_hub import HfApi'"])
    for name, values in times.items():
        sec.row(name, f"median {fmt_s(median(values))} ({ratio(median(values), floor)}x the HfApi import)")
    latest_ratio = ratio(median(times["ckpt-action latest (3 checkpoints)"]), floor)
    sec.target("latest process vs importing HfApi (report only)", f"{latest_ratio}x", None)

    local = ctx.work / "tiny-checkpoint"
    write_checkpoint(local, {"model.safetensors": 1})
    probes = {
        "latest": cmds["ckpt-action latest (3 checkpoints)"],
        "push": [*PY_CLI, "push", "--repo", REPO, "--local-dir", str(local), "--step", "9", "--json"],
        "pull": [*PY_CLI, "pull", "--repo", REPO, "--subfolder", "checkpoint-9",
                 "--local-dir", str(ctx.work / "tiny-pulled"), "--json"],
    }
    wandb_modules: dict[str, list[str]] = {}
    for name, cmd in probes.items():
        mods = _imported(cmd, ctx.env())
        wandb_modules[name] = [m for m in mods if m == "wandb" or m.startswith("wandb.")]
        sec.row(f"wandb modules imported by {name}", f"{len(wandb_modules[name])} (of {len(mods)} modules)")
        sec.check(f"{name} does not import wandb", not wandb_modules[name], ", ".join(wandb_modules[name][:3])
                  or "none")
    sec.data = {"repetitions": reps, "seconds": times, "seconds_median": {k: median(v) for k, v in times.items()},
                "latest_vs_hfapi_import": latest_ratio, "wandb_modules": wandb_modules}
    return sec
