"""Section 4: promote a checkpoint to ``release/``, against downloading and re-uploading it.

promote copies server-side (the commit names the LFS objects the repo already holds),
so no checkpoint bytes cross the network. The alternative a user scripts today is
``hf download`` then ``hf upload``; the Hub dedups LFS objects a repo already has, so
that re-upload sends few bytes too, but the download and the re-hashing remain.
"""

from __future__ import annotations

import shutil

from .context import Context
from .hubproc import Requests
from .pushed_checkpoint import pushed_checkpoint
from .report import Section, fmt_s
from .timing import PY_CLI, ratio, run


def run_section(ctx: Context) -> Section:
    ck = pushed_checkpoint(ctx)
    sec = Section(4, f"promote a {ck.bytes / 2**30:.2f} GiB checkpoint to a release folder")
    ctx.hub.mark()
    ours = run([*PY_CLI, "promote", "--repo", ck.repo, "--subfolder", ck.subfolder, "--to", "release", "--json"],
               ctx.env())
    reqs = Requests(ctx.hub.since_mark())
    sec.row("ckpt-action promote", f"{fmt_s(ours.seconds)}, {reqs.lfs_bytes_up} LFS bytes up, {reqs.bytes_in} bytes "
            f"sent, {reqs.bytes_out} bytes received, {reqs.commits} commit(s), {reqs.count} requests")

    target = ctx.work / "promote-by-hand"
    ctx.hub.mark()
    env = ctx.env()
    down = run(["hf", "download", ck.repo, "--include", f"{ck.subfolder}/*", "--local-dir", str(target)], env)
    up = run(["hf", "upload", ck.repo, str(target / ck.subfolder), "release-by-hand"], env)
    hand = Requests(ctx.hub.since_mark())
    shutil.rmtree(target, ignore_errors=True)
    by_hand = down.seconds + up.seconds
    sec.row("hf download + hf upload", f"{fmt_s(by_hand)} ({fmt_s(down.seconds)} + {fmt_s(up.seconds)}), "
            f"{hand.lfs_bytes_up} LFS bytes up, {hand.bytes_in} bytes sent, {hand.bytes_out} bytes received, "
            f"{hand.commits} commit(s), {hand.count} requests")
    speed = ratio(by_hand, ours.seconds)
    sec.row("promote speed-up", f"{speed}x")
    sec.target("promote uploads no checkpoint bytes", f"{reqs.lfs_bytes_up} LFS bytes", reqs.lfs_bytes_up == 0)
    sec.target("promote faster than download + re-upload", f"{speed}x", (speed or 0) > 1)
    sec.check("promote sends 0 LFS bytes", reqs.lfs_bytes_up == 0, f"{reqs.lfs_bytes_up} bytes")
    sec.check("promote downloads no checkpoint bytes", reqs.bytes_out < ck.lfs_bytes // 100,
              f"{reqs.bytes_out} bytes received < 1% of {ck.lfs_bytes}")
    sec.check("promote is one commit", reqs.commits == 1, f"{reqs.commits} commits")
    sec.data = {"bytes": ck.bytes, "promote": {"seconds": ours.seconds, "lfs_bytes": reqs.lfs_bytes_up,
                                               "bytes_in": reqs.bytes_in, "bytes_out": reqs.bytes_out,
                                               "commits": reqs.commits, "requests": reqs.count},
                "by_hand": {"seconds": by_hand, "download_seconds": down.seconds, "upload_seconds": up.seconds,
                            "lfs_bytes": hand.lfs_bytes_up, "bytes_in": hand.bytes_in, "bytes_out": hand.bytes_out,
                            "commits": hand.commits, "requests": hand.count},
                "speedup": speed}
    return sec
