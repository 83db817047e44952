"""Section 12: Storage Buckets: ``latest`` on many checkpoint folders of a bucket, and promote.

A checkpoint is pushed into ``hf://buckets/bench/ckpts`` (on the Xet path, which buckets
use), then copied server-side into many more folders, the newest left without its manifest
(a push cut short). ``latest`` must answer in a bounded number of requests: the bucket's
info, one listing page per 1,000 folders, then per folder examined its manifest (and the
redirect to its bytes) and its files' listing; a folder without a manifest costs one.
Then promote within the bucket (server-side copies by Xet hash) and into a model repo
(one commit), with the bytes each sends.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from .context import Context
from .hubproc import Requests
from .report import Section, fmt_s
from .timing import PY_CLI, run

BUCKET = "bench/ckpts"
URI = f"hf://buckets/{BUCKET}"
TREE_PAGE = 1000


def _xet_env(ctx: Context) -> dict[str, str]:
    env = ctx.env()
    env.pop("HF_HUB_DISABLE_XET", None)
    env["HF_XET_CACHE"] = str(Path(env["HF_HOME"]) / "xet")
    return env


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
    want = 2 + math.ceil(folders / TREE_PAGE) + 3  # info, pages, the torn newest's manifest (404), then 3
    sec.row("call: ckpt-action latest", f"{req.count} requests ({' + '.join(req.summary())}), {fmt_s(seconds)}")
    sec.check("latest takes the newest complete folder", found.handle is not None
              and found.handle.subfolder == f"checkpoint-{folders - 1}", str(found.handle))
    sec.check("latest requests = info + pages + 1 (no manifest) + 3 (manifest, its redirect, listing)",
              req.count == want, f"{req.count} == {want}")
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
            f" {req.bytes_out} bytes received, {req.commits} commit(s), {req.count} requests")
    sec.check("promote into a repo is one commit", req.commits == 1, f"{req.commits}")
    sec.data.update(folders=folders, latest_requests=want, size=size)
    return sec
