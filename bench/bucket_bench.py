"""Section 12: Storage Buckets: ``latest`` on many checkpoint folders of a bucket, and promote.

A checkpoint is pushed into ``hf://buckets/bench/ckpts`` (on the Xet path, which buckets
use), then copied server-side into many more folders, the newest left without its manifest
(a push cut short). ``latest`` must answer in a bounded number of requests: the bucket's
info, one listing page per 1,000 folders, then per folder examined its manifest (and the
redirect to its bytes) and its files' listing; a folder without a manifest costs one.
Then promote within the bucket (server-side copies by Xet hash) and into a model repo
(one commit), with the bytes each sends and receives, next to doing it by hand (``hf buckets
sync`` down, ``hf upload`` up). Throughput: push and pull of one checkpoint by ckpt-action next
to ``hf buckets sync`` and ``hf buckets cp`` of a checkpoint of the same size, each its own
random bytes (the CAS dedupes by content: the same bytes twice would send nothing the second
time), each pull with an empty Xet cache.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from .context import Context
from .hubproc import Requests
from .report import Section, fmt_s
from .timing import PY_CLI, median, ratio, run

BUCKET = "bench/ckpts"
URI = f"hf://buckets/{BUCKET}"
TREE_PAGE = 1000


def _xet_env(ctx: Context) -> dict[str, str]:
    env = ctx.env()
    env.pop("HF_HUB_DISABLE_XET", None)
    env["HF_XET_CACHE"] = str(Path(env["HF_HOME"]) / "xet")
    return env


def _fresh_env(ctx: Context, name: str) -> dict[str, str]:
    """A client environment with caches of its own (no chunk a previous step left)."""
    env = _xet_env(ctx)
    env["HF_HOME"] = str(ctx.work / f"home-{name}")
    env["HF_XET_CACHE"] = str(ctx.work / f"home-{name}" / "xet")
    return env


def _checkpoint(root: Path, size: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.safetensors").write_bytes(os.urandom(size))
    (root / "config.json").write_bytes(b'{"bench": true}')
    return root


def _mibs(size: int, seconds: float) -> str:
    return f"{size / 2**20 / seconds:.1f} MiB/s" if seconds > 0 else "n/a"


def _throughput(ctx: Context, sec: Section, size: int) -> None:
    """Push and pull by ckpt-action next to ``hf buckets sync`` and ``hf buckets cp``,
    alternating, ``reps`` times each (medians): one run of each is mostly the machine's noise.
    Nine: on the 2-core machines here one push pair's ratio spreads from 0.8x to 1.2x, and
    the median of five moved by 0.05x from run to run."""
    bucket = "bench/throughput"
    ctx.api().create_bucket(bucket, private=True, exist_ok=True)
    uri = f"hf://buckets/{bucket}"
    reps = 1 if ctx.quick else 9
    times: dict[str, list[float]] = {}
    moved: dict[str, Requests] = {}
    same = True

    def measure(name: str, cmd: list[str], env: dict[str, str]) -> None:
        ctx.hub.mark()
        times.setdefault(name, []).append(run(cmd, env).seconds)
        moved[name] = Requests(ctx.hub.since_mark())

    for rep in range(reps):
        # each push its own random bytes (the CAS dedupes), each pull an empty cache
        ours_src = _checkpoint(ctx.work / f"tput-ours-{rep}", size)
        sync_src = _checkpoint(ctx.work / f"tput-sync-{rep}", size)
        cp_src = _checkpoint(ctx.work / f"tput-cp-{rep}", size)
        ups = [("push", [*PY_CLI, "push", "--repo", uri, "--local-dir", str(ours_src), "--subfolder",
                         f"checkpoint-{rep + 1}", "--step", str(rep + 1), "--json"]),
               ("sync up", ["hf", "buckets", "sync", str(sync_src), f"{uri}/by-sync-{rep}"]),
               ("cp up", ["hf", "buckets", "cp", str(cp_src / "model.safetensors"),
                          f"{uri}/by-cp-{rep}/model.safetensors"])]
        downs = [("pull", [*PY_CLI, "pull", "--repo", uri, "--subfolder", f"checkpoint-{rep + 1}", "--local-dir",
                           str(ctx.work / f"tput-pulled-{rep}"), "--json"]),
                 ("sync down", ["hf", "buckets", "sync", f"{uri}/by-sync-{rep}", str(ctx.work / f"tput-synced-{rep}")]),
                 ("cp down", ["hf", "buckets", "cp", f"{uri}/by-cp-{rep}/model.safetensors",
                              str(ctx.work / f"tput-cp-down-{rep}.safetensors")])]
        for steps in (ups, downs):
            for name, cmd in (steps if rep % 2 == 0 else list(reversed(steps))):
                measure(name, cmd, _fresh_env(ctx, f"{name.replace(' ', '-')}-{rep}"))
        pulled = (ctx.work / f"tput-pulled-{rep}" / "model.safetensors").read_bytes()
        same = same and pulled == (ours_src / "model.safetensors").read_bytes()
    med = {name: median(values) for name, values in times.items()}
    for label, name in (("push: ckpt-action push", "push"), ("push: hf buckets sync", "sync up"),
                        ("push: hf buckets cp (the one big file)", "cp up"),
                        ("pull: ckpt-action pull (verified)", "pull"),
                        ("pull: hf buckets sync", "sync down"), ("pull: hf buckets cp (the one big file)", "cp down")):
        req = moved[name]
        sec.row(label, f"median {fmt_s(med[name])} of {reps}, {_mibs(size, med[name])}, {req.bytes_in} bytes sent,"
                f" {req.bytes_out} bytes received, {req.count} requests")
    for what, ours, theirs in (("push", "push", "sync up"), ("pull", "pull", "sync down")):
        r = ratio(med[ours], med[theirs])
        sec.row(f"{what}: ckpt-action / hf buckets sync (time)", f"{r:.2f}x" if r is not None else "n/a")
        sec.target(f"{what} at most 1.0x hf buckets sync's time", f"{r:.2f}x" if r is not None else "n/a",
                   r is not None and r <= 1.0)
    sec.check("ckpt-action pull hands over the pushed bytes", same, "model.safetensors")
    sec.data.update({f"{name.replace(' ', '_')}_s": med[name] for name in med})
    sec.data.update(throughput_reps=reps)


def _cas_up(req: Requests) -> int:
    return sum(int(r["bytes_in"]) for r in req.lines if r["listener"] == "cas" and r["method"] == "POST"
               and ("/v1/xorbs/" in r["path"] or "/v1/shards" in r["path"]))


def run_section(ctx: Context) -> Section:
    from ckpt_action.ops.discover import latest
    from ckpt_action.stores import BucketStore

    folders = 200 if ctx.quick else 1000
    size = (4 if ctx.quick else 64) * 2**20
    sec = Section(12, f"Storage Buckets: latest on {folders} folders, promote a {size / 2**20:.0f} MiB checkpoint")
    src = ctx.work / "bucket-src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "model.safetensors").write_bytes(os.urandom(size))
    (src / "config.json").write_bytes(b'{"bench": true}')
    ctx.hub.mark()
    pushed = run([*PY_CLI, "push", "--repo", URI, "--local-dir", str(src), "--step", "1", "--json"], _xet_env(ctx))
    req = Requests(ctx.hub.since_mark())
    sec.row("push into a new bucket (process)", f"{fmt_s(pushed.seconds)}, {_cas_up(req)} bytes to the CAS,"
            f" {req.count} requests")
    _throughput(ctx, sec, size)

    api = ctx.api()
    files = {f.path: f for f in api.list_bucket_tree(BUCKET, "checkpoint-1/", recursive=True)}
    copies = [("bucket", BUCKET, f.xet_hash, p.replace("checkpoint-1/", f"checkpoint-{n}/"))
              for n in range(2, folders) for p, f in files.items()]
    copies += [("bucket", BUCKET, f.xet_hash, p.replace("checkpoint-1/", f"checkpoint-{folders}/"))
               for p, f in files.items() if not p.endswith("ckpt-manifest.json")]
    api.batch_bucket_files(BUCKET, copy=copies)

    store = BucketStore(ctx.settings(), URI)
    latest(store)  # warm: the HTTP client's one-off setup
    ctx.hub.mark()
    started = time.perf_counter()
    found = latest(BucketStore(ctx.settings(), URI))
    seconds = time.perf_counter() - started
    req = Requests(ctx.hub.since_mark())
    want = 1 + math.ceil(folders / TREE_PAGE) + 3  # pages, the torn newest's manifest (404), then 3
    sec.row("call: ckpt-action latest", f"{req.count} requests ({' + '.join(req.summary())}), {fmt_s(seconds)}")
    sec.check("latest takes the newest complete folder", found.handle is not None
              and found.handle.subfolder == f"checkpoint-{folders - 1}", str(found.handle))
    sec.check("latest requests = pages + 1 (no manifest) + 3 (manifest, its redirect, listing)",
              req.count == want, f"{req.count} == {want}")
    # The goal counts a newest folder that is complete: one page, its manifest (and the
    # redirect to its bytes), its listing. Each torn folder above the answer costs one more.
    sec.target("at most 4 requests at 1,000 folders, + 1 per torn folder above the answer",
               f"{req.count} requests (1 torn folder above)", req.count - 1 <= 4 + math.ceil(folders / TREE_PAGE) - 1)
    ctx.hub.mark()
    proc = run([*PY_CLI, "latest", "--repo", URI, "--json"], _xet_env(ctx))
    preq = Requests(ctx.hub.since_mark())
    sec.row("process: ckpt-action latest", f"{preq.count} requests, {fmt_s(proc.seconds)}")

    assert found.handle is not None
    ctx.hub.mark()
    within = run([*PY_CLI, "promote", "--repo", URI, "--subfolder", found.handle.subfolder, "--revision",
                  found.handle.revision, "--to", "release/best", "--json"], _xet_env(ctx))
    req = Requests(ctx.hub.since_mark())
    sec.row("promote within the bucket (server-side copies)", f"{fmt_s(within.seconds)}, {_cas_up(req)} bytes to"
            f" the CAS (the new manifest only), {req.count} requests")
    sec.check("promote within a bucket sends no checkpoint bytes", _cas_up(req) < 64 * 1024, f"{_cas_up(req)}")
    api.create_repo("bench/released", private=True, exist_ok=True)
    ctx.hub.mark()
    across = run([*PY_CLI, "promote", "--repo", URI, "--subfolder", found.handle.subfolder, "--revision",
                  found.handle.revision, "--to", "release", "--to-repo", "bench/released", "--tag", "v1", "--json"],
                 _xet_env(ctx))
    req = Requests(ctx.hub.since_mark())
    sec.row("promote into a model repo (one commit)", f"{fmt_s(across.seconds)}, {_cas_up(req)} bytes to the CAS,"
            f" {req.bytes_in} bytes sent, {req.bytes_out} bytes received, {req.commits} commit(s),"
            f" {req.count} requests")
    sec.check("promote into a repo is one commit", req.commits == 1, f"{req.commits}")
    ours_in, ours_out = req.bytes_in, req.bytes_out
    api.create_repo("bench/released-by-hand", private=True, exist_ok=True)
    target = ctx.work / "promote-by-hand"
    env = _fresh_env(ctx, "by-hand")
    ctx.hub.mark()
    down = run(["hf", "buckets", "sync", f"{URI}/{found.handle.subfolder}", str(target)], env)
    up = run(["hf", "upload", "bench/released-by-hand", str(target), "release"], env)
    hand = Requests(ctx.hub.since_mark())
    sec.row("by hand: hf buckets sync down + hf upload", f"{fmt_s(down.seconds + up.seconds)} ({fmt_s(down.seconds)}"
            f" + {fmt_s(up.seconds)}), {_cas_up(hand)} bytes to the CAS, {hand.bytes_in} bytes sent,"
            f" {hand.bytes_out} bytes received, {hand.commits} commit(s), {hand.count} requests")
    sec.check("promote into a repo uploads no checkpoint bytes again (Xet dedupe)", _cas_up(req) < 64 * 1024,
              f"{_cas_up(req)}")
    sec.data.update(promote_bytes_in=ours_in, promote_bytes_out=ours_out, by_hand_bytes_in=hand.bytes_in,
                    by_hand_bytes_out=hand.bytes_out)
    sec.data.update(folders=folders, latest_requests=want, size=size)
    return sec
