"""Section 11: bytes a re-pull reads when the files it keeps cannot be trusted by their stat.

A restore from a cache (``actions/cache``, a copied volume) gives the files of an earlier
pull new mtimes with the same bytes; a record written under another user's key (another
machine, a fresh home) is not vouched for. Either way every kept file must be hashed before
it is kept: once. Measured as bytes this client process read (``rchar`` of Linux
``/proc/self/io``, through :mod:`bench.readcount`) per byte of the checkpoint; the Hub runs
in its own process, so its reads are not counted.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from .context import Context
from .hubproc import Requests
from .pushed_checkpoint import pushed_checkpoint
from .report import Section
from .timing import PY_CLI, run

GOAL = 1.0


def _counted_pull(ctx: Context, repo: str, subfolder: str, dest: Path, env: dict[str, str],
                  out: Path) -> tuple[int, Requests]:
    """``ckpt-action pull`` run under bench.readcount: (bytes it read, its requests)."""
    ctx.hub.mark()
    run([sys.executable, "-m", "bench.readcount", str(out), PY_CLI[1], "pull", "--repo", repo, "--subfolder",
         subfolder, "--local-dir", str(dest), "--json"], env)
    return int(json.loads(out.read_text())["rchar"]), Requests(ctx.hub.since_mark())


def _age_every_file(root: Path) -> None:
    """What a restore from a cache does: the same bytes, other mtimes."""
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith(".ckpt-pull"):
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 3600 * 10**9))


def run_section(ctx: Context) -> Section:
    ck = pushed_checkpoint(ctx)
    sec = Section(11, f"re-pull reads of kept files whose stat does not vouch for them "
                      f"({ck.bytes / 2**30:.2f} GiB checkpoint)")
    base = ctx.work / "repull-reads"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    dest = base / "dest"
    env = ctx.env()  # one HF_HOME for the pull and the re-pull after an mtime change: the record's key holds
    run([*PY_CLI, "pull", "--repo", ck.repo, "--subfolder", ck.subfolder, "--local-dir", str(dest), "--json"], env)
    unchanged, _ = _counted_pull(ctx, ck.repo, ck.subfolder, dest, env, base / "unchanged.json")
    _age_every_file(dest)
    touched, touched_reqs = _counted_pull(ctx, ck.repo, ck.subfolder, dest, env, base / "mtime.json")
    other_home, _ = _counted_pull(ctx, ck.repo, ck.subfolder, dest, ctx.env(), base / "home.json")
    shutil.rmtree(base, ignore_errors=True)

    def per_byte(read: int) -> float:
        return read / ck.bytes

    sec.row("re-pull, nothing changed: reads of each byte", f"{per_byte(unchanged):.2f} ({unchanged:,} bytes read)")
    sec.row("re-pull after every file's mtime changed: reads of each byte",
            f"{per_byte(touched):.2f} ({touched:,} bytes read, {touched_reqs.count} requests)")
    sec.row("re-pull of a record whose mark does not verify (another home): reads of each byte",
            f"{per_byte(other_home):.2f} ({other_home:,} bytes read)")
    sec.target(f"a re-pull after an mtime change reads each byte at most {GOAL:.0f} time (before: 3.0)",
               f"{per_byte(touched):.2f}", per_byte(touched) < GOAL + 0.05)
    # Deterministic: each kept file is hashed, and hashed once (a little over 1.0 for the
    # record, the key and what the interpreter reads on the way).
    sec.check("a re-pull after an mtime change hashes every kept byte", per_byte(touched) >= 1.0,
              f"{per_byte(touched):.3f} >= 1")
    sec.check("a re-pull after an mtime change reads each kept byte once", per_byte(touched) < 1.5,
              f"{per_byte(touched):.3f} < 1.5")
    sec.check("a record not vouched for has every kept byte hashed, once", 1.0 <= per_byte(other_home) < 1.5,
              f"1 <= {per_byte(other_home):.3f} < 1.5")
    sec.check("an unchanged re-pull reads no kept byte", per_byte(unchanged) < 0.5, f"{per_byte(unchanged):.3f} < 0.5")
    sec.check("the re-pull after an mtime change downloads no file", not any(
        r["method"] == "GET" and "/resolve/" in r["path"]
        and not r["path"].split("?", 1)[0].endswith("/ckpt-manifest.json") for r in touched_reqs.lines),
        "no GET of a checkpoint file")
    sec.data = {"bytes": ck.bytes, "rchar": {"unchanged": unchanged, "mtime_changed": touched,
                                             "record_not_vouched": other_home},
                "reads_per_byte": {"unchanged": per_byte(unchanged), "mtime_changed": per_byte(touched),
                                   "record_not_vouched": per_byte(other_home)},
                "goal": GOAL, "before": 3.0}
    return sec
