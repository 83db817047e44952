"""``python -m bench [--quick] [--out DIR] [--only N,...]``: run, print the table, write JSON.

A full run (no ``--quick``, no ``--only``) also rewrites BENCHMARKS.md at the repo root.
Exits 1 when a deterministic check fails (request or commit counts, bytes uploaded),
never because of a timing.
"""

from __future__ import annotations

import argparse
import compileall
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .report import Section, benchmarks_md, machine, table

if TYPE_CHECKING:
    from .context import Context

REPO_ROOT = Path(__file__).resolve().parent.parent
INSTALL = "pip install -e '.[dev]' -e ./packages/ckpt-localhub (BENCHMARKS.md, How to reproduce)"


def missing(exc: ModuleNotFoundError) -> str:
    """The one line the bench says when a package it runs is not installed: the local Hub (a
    distribution of its own, in packages/ckpt-localhub, which the ``[dev]`` extra does not bring),
    one of its dependencies, or the client's."""
    top = (exc.name or "?").split(".")[0]
    if top == "ckpt_localhub":
        return ("python -m bench needs the local Hub (ckpt-action-localhub), which is not installed: "
                "pip install -e ./packages/ckpt-localhub (BENCHMARKS.md, How to reproduce)")
    return f"python -m bench needs the package {top!r}, which is not installed: {INSTALL}"

TITLES = {1: "latest on many checkpoints", 2: "push and pull throughput", 3: "re-push of unchanged content",
          4: "promote", 5: "CLI cold start", 6: "container image", 7: "pulls that move only what they lack",
          8: "prune --free-storage", 9: "Xet and plain LFS", 10: "one checkpoint from many ranks",
          11: "re-pull reads of kept files", 12: "Storage Buckets", 13: "step time while pushing",
          14: "resume in one figure", 15: "promote --as-model and DCP consolidation",
          16: "resume after a kill, durable after SIGTERM"}


def _sections() -> dict[int, Callable[[Context], Section]]:
    # Imported here, after configure_client_env(), because huggingface_hub reads its
    # switches at import time.
    from . import (
        asmodel_bench,
        bucket_bench,
        coldstart_bench,
        distributed_bench,
        freestorage_bench,
        image_bench,
        killresume_bench,
        latest_bench,
        promote_bench,
        repull_bench,
        repull_reads_bench,
        repush_bench,
        resume_bench,
        steptime_bench,
        transfer_bench,
        xet_bench,
    )

    return {1: latest_bench.run_section, 2: transfer_bench.run_section, 3: repush_bench.run_section,
            4: promote_bench.run_section, 5: coldstart_bench.run_section, 6: image_bench.run_section,
            7: repull_bench.run_section, 8: freestorage_bench.run_section, 9: xet_bench.run_section,
            10: distributed_bench.run_section, 11: repull_reads_bench.run_section, 12: bucket_bench.run_section,
            13: steptime_bench.run_section, 14: resume_bench.run_section, 15: asmodel_bench.run_section,
            16: killresume_bench.run_section}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small data, < 2 min; for CI")
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "out"), help="dir for results.json")
    parser.add_argument("--only", help="comma-separated section numbers, e.g. 1,3")
    parser.add_argument("--work", help="scratch dir (default: a temp dir under /tmp, removed at the end)")
    args = parser.parse_args(argv)
    only = sorted({int(n) for n in args.only.split(",")}) if args.only else sorted(TITLES)
    try:  # what it runs against, and with: one line saying what to install when it is not there
        from .context import Context, configure_client_env
        from .hubproc import HubProcess

        configure_client_env()
        sections = _sections()
    except ModuleNotFoundError as exc:
        print(missing(exc), file=sys.stderr)
        return 2
    # Timed as installed: pip compiles an installed package's modules, and every other tool
    # measured here is such a package. A checkout run with PYTHONDONTWRITEBYTECODE (or whose
    # sources changed since) would compile ours anew in every process (about 10 ms a module).
    compileall.compile_dir(str(REPO_ROOT / "ckpt_action"), quiet=1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ckpt-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: list[Section] = []
    hub = HubProcess(work / "hub")
    try:
        ctx = Context(quick=args.quick, work=work, hub=hub)
        for n in only:
            print(f"[bench] {n}. {TITLES[n]} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            try:
                sec = sections[n](ctx)
            except Exception as exc:  # noqa: BLE001 - one broken section is reported, the rest still run
                traceback.print_exc()
                sec = Section(n, TITLES[n])
                sec.check("section ran", False, f"{type(exc).__name__}: {exc}")
            sec.data["section_seconds"] = round(time.perf_counter() - t, 2)
            results.append(sec)
    finally:
        hub.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - started
    info = machine()
    text = table(results)
    print(text)
    failed = [c for s in results for c in s.checks if not c["ok"]]
    doc = {"quick": args.quick, "machine": info, "seconds": round(seconds, 1),
           "sections": {str(s.number): s.to_dict() for s in results}, "failed_checks": failed}
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {out / 'results.json'} ({seconds:.0f} s)")
    if not args.quick and not args.only:
        (REPO_ROOT / "BENCHMARKS.md").write_text(benchmarks_md(results, info, seconds))
        print(f"wrote {REPO_ROOT / 'BENCHMARKS.md'}")
    if failed:
        print(f"{len(failed)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
