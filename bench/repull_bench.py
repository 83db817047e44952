"""Section 7: pulls that move only the bytes they lack (re-pull, N+1 over N, weights only).

On a persistent runner the next job finds the last pull still on disk, and consecutive
checkpoints share most of their bytes. Measured from the server's access log: the body
bytes of checkpoint files GET through ``/resolve`` (the manifest, which every pull reads
to know what to verify, is counted apart), beside the ``hf`` CLI re-downloading into its
local dir and from its cache.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .context import Context
from .hubproc import Requests
from .pushed_checkpoint import pushed_checkpoint
from .report import Section, fmt_s
from .timing import PY_CLI, run

NEXT = "checkpoint-501"
CHANGED = {"config.json": b'{"model_type": "bench", "step": 501}\n', "trainer_state.json": b'{"global_step": 501}\n'}


def _file_bytes(reqs: Requests) -> int:
    """Body bytes of checkpoint files sent through /resolve (the manifest aside)."""
    return sum(int(r["bytes_out"]) for r in reqs.lines if r["method"] == "GET" and "/resolve/" in r["path"]
               and not r["path"].split("?", 1)[0].endswith("/ckpt-manifest.json"))


def _measured(ctx: Context, cmd: list[str], env: dict[str, str]) -> tuple[float, Requests]:
    ctx.hub.mark()
    seconds = run(cmd, env).seconds
    return seconds, Requests(ctx.hub.since_mark())


def _next_checkpoint(ctx: Context, local: Path) -> Path:
    """checkpoint N+1 on disk: N's big files (hard links, not copies) and new small files."""
    nxt = ctx.work / "repull-next"
    shutil.rmtree(nxt, ignore_errors=True)
    nxt.mkdir()
    for path in local.iterdir():
        if path.name not in CHANGED:
            os.link(path, nxt / path.name)
    for name, data in CHANGED.items():
        (nxt / name).write_bytes(data)
    return nxt


def run_section(ctx: Context) -> Section:
    ck = pushed_checkpoint(ctx)
    sec = Section(7, f"pulls that move only what they lack ({ck.bytes / 2**30:.2f} GiB checkpoint)")
    nxt = _next_checkpoint(ctx, ck.local_dir)
    run([*PY_CLI, "push", "--repo", ck.repo, "--local-dir", str(nxt), "--subfolder", NEXT, "--step", "501",
         "--json"], ctx.env())
    base = ctx.work / "repull"
    shutil.rmtree(base, ignore_errors=True)
    ours = base / "ckpt-action"
    pull = [*PY_CLI, "pull", "--repo", ck.repo, "--subfolder", ck.subfolder, "--local-dir", str(ours), "--json"]
    first_s, first = _measured(ctx, pull, ctx.env())
    again_s, again = _measured(ctx, pull, ctx.env())

    hf_dir = base / "hf-local-dir"
    hf_local = ["hf", "download", ck.repo, "--include", f"{ck.subfolder}/*", "--local-dir", str(hf_dir)]
    env_local = ctx.env()
    hf_local_first_s, hf_local_first = _measured(ctx, hf_local, env_local)
    hf_local_s, hf_local_again = _measured(ctx, hf_local, env_local)
    hf_cached = ["hf", "download", ck.repo, "--include", f"{ck.subfolder}/*"]
    env_cache = ctx.env()  # one HF_HOME for both runs: the second answers from its cache
    hf_cache_first_s, hf_cache_first = _measured(ctx, hf_cached, env_cache)
    hf_cache_s, hf_cache_again = _measured(ctx, hf_cached, env_cache)

    next_s, next_reqs = _measured(ctx, [*PY_CLI, "pull", "--repo", ck.repo, "--subfolder", NEXT, "--local-dir",
                                        str(ours), "--json"], ctx.env())
    weights = {p.name: p.stat().st_size for p in ck.local_dir.iterdir() if p.name.endswith(".safetensors")}
    part_s, part = _measured(ctx, [*PY_CLI, "pull", "--repo", ck.repo, "--subfolder", ck.subfolder, "--include",
                                   "*.safetensors", "--local-dir", str(base / "weights-only"), "--json"], ctx.env())
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(nxt, ignore_errors=True)

    def line(seconds: float, reqs: Requests) -> str:
        return f"{_file_bytes(reqs)} file bytes, {reqs.count} requests, {fmt_s(seconds)}"

    changed = sum(map(len, CHANGED.values()))
    sec.row("ckpt-action pull, first (into an empty dir)", line(first_s, first))
    sec.row("ckpt-action pull again into the same dir", line(again_s, again))
    sec.row("hf download --local-dir, first", line(hf_local_first_s, hf_local_first))
    sec.row("hf download --local-dir again into the same dir", line(hf_local_s, hf_local_again))
    sec.row("hf download (cache), first", line(hf_cache_first_s, hf_cache_first))
    sec.row("hf download (cache) again, from its cache", line(hf_cache_s, hf_cache_again))
    sec.row(f"ckpt-action pull of {NEXT} over {ck.subfolder} (2 small files changed)", line(next_s, next_reqs))
    sec.row("ckpt-action pull --include '*.safetensors' (weights only)", line(part_s, part))
    sec.target("re-pull of an unchanged checkpoint downloads 0 file bytes", f"{_file_bytes(again)} bytes",
               _file_bytes(again) == 0)
    sec.target("N+1 over N downloads only the changed files", f"{_file_bytes(next_reqs)} of {changed} bytes",
               _file_bytes(next_reqs) == changed)
    sec.target("weights only downloads only the weights", f"{_file_bytes(part)} of {sum(weights.values())} bytes",
               _file_bytes(part) == sum(weights.values()))
    sec.check("re-pull downloads 0 file bytes", _file_bytes(again) == 0, f"{_file_bytes(again)} bytes")
    sec.check("N+1 over N downloads exactly the changed files", _file_bytes(next_reqs) == changed,
              f"{_file_bytes(next_reqs)} == {changed}")
    sec.check("weights-only pull downloads exactly the weights", _file_bytes(part) == sum(weights.values()),
              f"{_file_bytes(part)} == {sum(weights.values())}")
    sec.check("the first pull downloads every byte once", _file_bytes(first) == ck.bytes,
              f"{_file_bytes(first)} == {ck.bytes}")
    sec.data = {
        "bytes": ck.bytes, "changed_bytes": changed, "weights_bytes": sum(weights.values()),
        "file_bytes": {"first": _file_bytes(first), "repull": _file_bytes(again), "next": _file_bytes(next_reqs),
                       "weights_only": _file_bytes(part), "hf_local_first": _file_bytes(hf_local_first),
                       "hf_local_again": _file_bytes(hf_local_again), "hf_cache_first": _file_bytes(hf_cache_first),
                       "hf_cache_again": _file_bytes(hf_cache_again)},
        "seconds": {"first": first_s, "repull": again_s, "next": next_s, "weights_only": part_s,
                    "hf_local_first": hf_local_first_s, "hf_local_again": hf_local_s,
                    "hf_cache_first": hf_cache_first_s, "hf_cache_again": hf_cache_s},
    }
    return sec
