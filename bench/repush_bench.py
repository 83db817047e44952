"""Section 3: pushing unchanged content again must upload nothing and commit nothing.

CI re-runs a job after a flaky step; the push then sees the same files. Measured from
the access log: LFS bytes PUT and commit POSTs, for ckpt-action and for ``hf upload``.
"""

from __future__ import annotations

from .context import Context
from .hubproc import Requests
from .pushed_checkpoint import pushed_checkpoint
from .report import Section, fmt_s
from .timing import PY_CLI, run


def run_section(ctx: Context) -> Section:
    ck = pushed_checkpoint(ctx)
    sec = Section(3, f"re-push of an unchanged {ck.bytes / 2**30:.2f} GiB checkpoint")
    cmds = {
        "ckpt-action push": [*PY_CLI, "push", "--repo", ck.repo, "--local-dir", str(ck.local_dir),
                             "--subfolder", ck.subfolder, "--step", "500", "--json"],
        "hf upload": ["hf", "upload", ck.repo, str(ck.local_dir), ck.subfolder],
    }
    measured = {}
    for name, cmd in cmds.items():
        ctx.hub.mark()
        seconds = run(cmd, ctx.env()).seconds
        reqs = Requests(ctx.hub.since_mark())
        measured[name] = {"lfs_bytes": reqs.lfs_bytes_up, "commits": reqs.commits, "requests": reqs.count,
                          "bytes_in": reqs.bytes_in, "seconds": seconds}
        sec.row(name, f"{reqs.lfs_bytes_up} LFS bytes, {reqs.commits} commits, {reqs.count} requests, "
                f"{reqs.bytes_in} bytes sent in all, {fmt_s(seconds)}")
    ours = measured["ckpt-action push"]
    sec.target("0 LFS bytes and 0 commits", f"{ours['lfs_bytes']} bytes, {ours['commits']} commits",
               ours["lfs_bytes"] == 0 and ours["commits"] == 0)
    sec.check("re-push uploads 0 LFS bytes", ours["lfs_bytes"] == 0, f"{ours['lfs_bytes']} bytes")
    sec.check("re-push makes 0 commits", ours["commits"] == 0, f"{ours['commits']} commits")
    sec.data = {"bytes": ck.bytes, **{k.replace(" ", "_").replace("-", "_"): v for k, v in measured.items()}}
    return sec
