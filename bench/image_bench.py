"""Section 6: the container image's size and the cold start of ``--help`` in it (Podman).

The image tests build it (``localhost/ckpt-action:test``); this only measures one that
exists, tagged like ``ckpt-action:*``, and says "skipped" otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from .context import Context
from .report import Section, fmt_s
from .timing import median, run


def _podman() -> str | None:
    """The project's Podman (``.ci/podman.sh`` wraps it with its own storage), else plain podman."""
    wrapped = os.environ.get("CKPT_PODMAN") or "/var/tmp/ckpt-action-podman/bin/podman"
    if os.access(wrapped, os.X_OK):
        return wrapped
    return shutil.which("podman")


def _find_image(podman: str) -> dict[str, object] | None:
    out = subprocess.run([podman, "images", "--format", "json"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None
    for image in json.loads(out.stdout or "[]"):
        for name in image.get("Names") or []:
            if "ckpt-action" in name or "ckpt_action" in name:
                return {"name": name, "size": int(image.get("Size") or 0)}
    return None


def run_section(ctx: Context) -> Section:
    sec = Section(6, "container image")
    podman = _podman()
    if podman is None:
        sec.skipped = "no podman"
        return sec
    image = _find_image(podman)
    if image is None:
        sec.skipped = "no podman image"
        return sec
    name = str(image["name"])
    reps = 1 if ctx.quick else 5
    env = dict(os.environ)
    times = [run([podman, "run", "--rm", name, "--help"], env).seconds for _ in range(reps)]
    sec.row(f"image {name}", f"{int(image['size']) / 1e6:.0f} MB")
    sec.row("podman run --rm IMAGE --help", f"median {fmt_s(median(times))} of {reps}")
    sec.data = {"image": name, "size_bytes": image["size"], "help_seconds": times}
    return sec
