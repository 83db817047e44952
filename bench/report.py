"""What every section returns, the table printed on stdout, and BENCHMARKS.md."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    """One numbered benchmark of the issue: table rows, raw numbers, targets and checks.

    ``checks`` are the deterministic assertions (request and commit counts, bytes): a
    failed one makes the bench exit non-zero. ``targets`` are the issue's goals, reported
    as met or missed, and may involve timings, so they never fail the run.
    """

    number: int
    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None

    def row(self, what: str, value: str) -> None:
        self.rows.append((what, value))

    def target(self, goal: str, measured: str, met: bool | None) -> None:
        self.targets.append({"goal": goal, "measured": measured, "met": met})

    def check(self, what: str, ok: bool, detail: str) -> None:
        self.checks.append({"check": what, "ok": bool(ok), "detail": detail})

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "rows": [list(r) for r in self.rows],
                "data": self.data, "targets": self.targets, "checks": self.checks, "skipped": self.skipped}


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_rate(bytes_: int, seconds: float) -> str:
    return f"{bytes_ / seconds / 1e6:.0f} MB/s" if seconds > 0 else "n/a"


def table(sections: list[Section]) -> str:
    """Plain-text table: one block per section, then the targets and checks."""
    width = max([len(w) for s in sections for w, _ in s.rows] + [40])
    out: list[str] = []
    for s in sections:
        out.append(f"{s.number}. {s.title}")
        if s.skipped:
            out.append(f"   skipped ({s.skipped})")
        for what, value in s.rows:
            out.append(f"   {what:<{width}}  {value}")
        for t in s.targets:
            mark = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
            out.append(f"   target: {t['goal']} -> {t['measured']} [{mark}]")
        for c in s.checks:
            out.append(f"   check: {c['check']} -> {'ok' if c['ok'] else 'FAILED'} ({c['detail']})")
        out.append("")
    return "\n".join(out)


def markdown(sections: list[Section]) -> str:
    out: list[str] = []
    for s in sections:
        out.append(f"### {s.number}. {s.title}\n")
        if s.skipped:
            out.append(f"Skipped ({s.skipped}).\n")
        if s.rows:
            out.append("| measure | value |\n|---|---|")
            out += [f"| {w} | {v} |" for w, v in s.rows]
            out.append("")
        if s.targets:
            out.append("| target | measured | |\n|---|---|---|")
            out += [f"| {t['goal']} | {t['measured']} | {({True: 'met', False: '**missed**', None: 'n/a'})[t['met']]} |"
                    for t in s.targets]
            out.append("")
    return "\n".join(out)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            kib = int(fh.readline().split()[1])
        return f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        return "unknown"


def machine() -> dict[str, str]:
    import huggingface_hub

    try:
        curl = subprocess.run(["curl", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    except OSError:
        curl = "not installed"
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": str(os.cpu_count()),
            "cpu": _cpu_model(), "memory": _memory(), "os": platform.platform(),
            "python": platform.python_version(), "huggingface_hub": huggingface_hub.__version__, "curl": curl}


def benchmarks_md(sections: list[Section], info: dict[str, str], seconds: float) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `python -m bench` (do not edit by hand). Every number below was measured in one run,",
        "on the local Hub (`packages/ckpt-localhub/ckpt_localhub`) over loopback, with each tool side by side and in",
        "alternating order. Machines like this one are noisy: compare the **ratios**, not the absolute",
        "times. Request counts, commits and bytes are exact (read from the server's access log).",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        f"- whole run: {seconds:.0f} s",
        "",
        "## Results",
        "",
        markdown(sections),
        "## How to reproduce",
        "",
        "<!-- not-run: the full bench takes many minutes; tests/e2e/test_bench_quick.py runs "
        "python -m bench --quick -->",
        "```sh",
        "# in a clone of this repository: a venv, then ckpt-action, hf, the dev tools",
        "# (the [dev] extra) and the local Hub (a package of its own)",
        "python3 -m venv .venv && . .venv/bin/activate",
        "pip install -e '.[dev]' -e ./packages/ckpt-localhub",
        "python -m bench             # full run: table, results.json, BENCHMARKS.md",
        "python -m bench --only 1,3  # some sections",
        "python -m bench --quick     # < 2 min; checks counts and bytes only (.ci/run)",
        "```",
        "",
        "Each measured client is its own process with a fresh `HF_HOME` (no warm cache), talking to a",
        "local Hub process with `HF_HUB_DISABLE_XET=1` (plain LFS), except section 9, which runs the Xet",
        "path (`hf_xet`, the local Hub's CAS listener) and plain LFS side by side. The `hf` client",
        "fetches `GET /api/agent-harnesses` once a day; with a fresh `HF_HOME` that is once per process,",
        "so it is counted apart and excluded from request counts.",
        "",
        "The local Hub turns Nagle's algorithm off on its connections: with it on, every small API response",
        "waited for the client's delayed ACK (~40 ms) and latency, not the approach, decided `latest`. The",
        "real Hub has no such stall. LFS downloads follow the Hub's redirect to a second listener standing",
        "in for its CDN, as in production; request counts include those hops.",
        "Throughput is bytes / whole-process wall time (hashing and start included).",
        "",
    ]
    return "\n".join(lines)
