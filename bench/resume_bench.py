"""Section 14: the whole resume in one figure, against curl fetching the same bytes.

A fresh process (``ckpt-action pull --latest``: find the newest complete checkpoint, pull it,
verify every file against its manifest) into an empty dir, against one curl process GETting
the same files (the manifest included) of the same subfolder to the same disk. Medians of
alternating runs; the goal is at most 1.2x curl's time. Twice: from the model repo, and from
a Storage Bucket holding the same checkpoint (``hf://buckets/bench/resume``, pushed on the
Xet path buckets use; each pull with an empty Xet cache; curl GETs the bucket's resolve
route, which serves the same bytes).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

from .bucket_bench import _xet_env
from .context import Context
from .pushed_checkpoint import pushed_checkpoint
from .report import Section, fmt_rate, fmt_s
from .timing import PY_CLI, median, run

CURL_ENV = {"PATH": "/usr/bin:/bin"}
GOAL = 1.2
MANIFEST = "ckpt-manifest.json"
BUCKET = "bench/resume"


def _alternate(ctx: Context, label: str, names: list[str], reps: int, resume: list[str],
               env: Callable[[], dict[str, str]], url: Callable[[str, str], str],
               ) -> tuple[list[float], list[float], str, bool]:
    """(resume seconds, curl seconds, the subfolder latest answered, whether both fetched
    the same files, whole) of ``reps`` alternating runs of each."""
    resume_s: list[float] = []
    curl_s: list[float] = []
    subfolder = ""
    # What each way fetched, by name: latest may answer a newer checkpoint than the one pushed
    # here (another section pushes checkpoint-501 into the same repo), so the resume is held to
    # the bytes curl fetched from the same folder, not to this section's local copy.
    got: dict[str, dict[str, int]] = {"resume": {}, "curl": {}}
    for rep in range(reps):
        for who in (("resume", "curl") if rep % 2 == 0 else ("curl", "resume")):
            target = ctx.work / f"resume-{label}-{who}-{rep}"
            shutil.rmtree(target, ignore_errors=True)
            if who == "resume":
                done = run([*resume, "--local-dir", str(target), "--json"], env())
                resume_s.append(done.seconds)
                subfolder = json.loads(done.stdout)["subfolder"]
            else:
                target.mkdir(parents=True)
                cmd = ["curl", "-s", "-f", "-L", "-H", "Authorization: Bearer hf_bench"]
                for name in names:
                    cmd += [url(subfolder, name), "-o", str(target / name)]
                curl_s.append(run(cmd, CURL_ENV).seconds)
            got[who] = {name: (target / name).stat().st_size for name in names if (target / name).is_file()}
            shutil.rmtree(target, ignore_errors=True)
    same = set(got["resume"]) == set(got["curl"]) == set(names) and got["resume"] == got["curl"]
    return resume_s, curl_s, subfolder, same


def run_section(ctx: Context) -> Section:
    ck = pushed_checkpoint(ctx)
    names = [*sorted(p.name for p in ck.local_dir.iterdir()), MANIFEST]
    reps = 1 if ctx.quick else 3  # quick: one of each (its times are report-only, its checks exact from one)
    resume_s, curl_s, subfolder, same = _alternate(
        ctx, "repo", names, reps, [*PY_CLI, "pull", "--repo", ck.repo, "--latest"], ctx.env,
        lambda sub, name: f"{ctx.url}/{ck.repo}/resolve/main/{sub or ck.subfolder}/{name}")
    uri = f"hf://buckets/{BUCKET}"
    run([*PY_CLI, "push", "--repo", uri, "--local-dir", str(ck.local_dir), "--subfolder", ck.subfolder, "--step",
         "500", "--json"], _xet_env(ctx))
    b_resume_s, b_curl_s, b_subfolder, b_same = _alternate(
        ctx, "bucket", names, reps, [*PY_CLI, "pull", "--repo", uri, "--latest"], lambda: _xet_env(ctx),
        lambda sub, name: f"{ctx.url}/buckets/{BUCKET}/resolve/{sub or ck.subfolder}/{name}")
    ratio = median(resume_s) / median(curl_s)
    b_ratio = median(b_resume_s) / median(b_curl_s)
    sec = Section(14, f"resume in one figure: latest + verified pull of a {ck.bytes / 2**30:.2f} GiB checkpoint,"
                      " against curl, from a model repo and from a Storage Bucket")
    sec.row("ckpt-action pull --latest (a fresh process: latest, pull, verify)",
            f"median {fmt_s(median(resume_s))} = {fmt_rate(ck.bytes, median(resume_s))}")
    sec.row(f"curl GET of the same {len(names)} files to the same disk",
            f"median {fmt_s(median(curl_s))} = {fmt_rate(ck.bytes, median(curl_s))}")
    sec.row("resume / curl", f"{ratio:.2f}x ({reps} runs each, alternating)")
    sec.row(f"bucket: ckpt-action pull --repo {uri} --latest (a fresh process, an empty Xet cache)",
            f"median {fmt_s(median(b_resume_s))} = {fmt_rate(ck.bytes, median(b_resume_s))}")
    sec.row(f"bucket: curl GET of the same {len(names)} files (the bucket's resolve route)",
            f"median {fmt_s(median(b_curl_s))} = {fmt_rate(ck.bytes, median(b_curl_s))}")
    sec.row("bucket: resume / curl", f"{b_ratio:.2f}x ({reps} runs each, alternating)")
    sec.target(f"resume at most {GOAL}x curl's time", f"{ratio:.2f}x", ratio <= GOAL)
    sec.target(f"from a bucket, resume at most {GOAL}x curl's time", f"{b_ratio:.2f}x", b_ratio <= GOAL)
    sec.check("the resume pulled every file of the checkpoint, whole", same, subfolder)
    sec.check("from a bucket, the resume pulled every file of the checkpoint, whole", b_same, b_subfolder)
    sec.data = {"bytes": ck.bytes, "subfolder": subfolder, "repetitions": reps, "resume_seconds": resume_s,
                "curl_seconds": curl_s, "ratio": round(ratio, 3),
                "bucket": {"uri": uri, "subfolder": b_subfolder, "resume_seconds": b_resume_s,
                           "curl_seconds": b_curl_s, "ratio": round(b_ratio, 3)}}
    return sec
