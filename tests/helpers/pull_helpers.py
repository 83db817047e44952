"""Helpers of the pull tests: seed checkpoints, run pulls, read what the Hub sent from its log."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import read_tree
from tests.helpers.chaos_helpers import env_for, seed

RECORD = ".ckpt-pull.json"
_RESOLVE = re.compile(r"^/[^/]+/[^/]+/resolve/[0-9a-f]{40}/(.+)$")


def file_gets(hub: Any, start: int = 0, *, manifest: bool = False) -> dict[str, int]:
    """Paths GET through /resolve since log entry ``start``, with the bytes each sent.

    The manifest is left out unless asked for: every pull reads it to know what to verify.
    """
    out: dict[str, int] = {}
    for entry in hub.log_entries()[start:]:
        m = _RESOLVE.match(entry["path"].split("?", 1)[0])
        if entry["method"] == "GET" and m and (manifest or not m.group(1).endswith("/ckpt-manifest.json")):
            out[m.group(1)] = out.get(m.group(1), 0) + int(entry["bytes_out"])
    return out


class Puller:
    """Runs ``pull`` through the real CLI against one local Hub, counting what each run fetched."""

    def __init__(self, hub: Any, cli: Any, tmp_path: Path, repo: str = "o/r") -> None:
        self.hub, self.cli, self.tmp_path, self.repo = hub, cli, tmp_path, repo
        self.env = env_for(hub, tmp_path)

    def seed(self, subfolder: str, files: dict[str, bytes], step: int | None = None) -> str:
        return seed(self.hub.url, self.repo, subfolder, files, self.tmp_path / "seeds", step=step)

    def __call__(self, subfolder: str, dest: Path, *args: str, env: dict[str, str] | None = None) -> Any:
        start = len(self.hub.log_entries())
        run = self.cli("pull", "--repo", self.repo, "--subfolder", subfolder, "--local-dir", str(dest), "--json",
                       *args, env=env or self.env)
        run.gets = file_gets(self.hub, start)
        return run


def pulled(dest: Path) -> dict[str, bytes]:
    """The checkpoint files in a pulled dir (the manifest and the pull record aside)."""
    tree = read_tree(dest)
    tree.pop("ckpt-manifest.json", None)
    tree.pop(RECORD, None)
    return tree


def record(dest: Path) -> dict[str, Any]:
    return json.loads((dest / RECORD).read_bytes())
