"""What a signature does not say, said inside the folder: ``ckpt-provenance.json``.

A signature proves who signed which bytes, not where they belong: an old signed
checkpoint copied into ``release`` (or into another repo) would still verify. So a signed
push or promote writes this small statement into the folder (repo, subfolder, step, the
training code's commit, the workflow run); the signature covers it, and pull checks that it
names the repo and folder being pulled, then reports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ckpt_action.checkpoint.signing import SignatureError
from ckpt_action.errors import quoted

PROVENANCE_NAME = "ckpt-provenance.json"
FORMAT = "ckpt-action/provenance/v1"
_MAX_BYTES = 64 * 1024
_SHA_RE = re.compile(r"\A[0-9a-f]{40}\Z")
_RUN_RE = re.compile(r"\Ahttps://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/[0-9]+"
                     r"(?:/attempts/[0-9]+)?\Z")


@dataclass(frozen=True)
class Provenance:
    repo: str
    subfolder: str
    step: int | None
    source_commit: str | None = None
    """The commit of the training code (``GITHUB_SHA`` in Actions)."""
    workflow_run: str | None = None
    """The run's URL (from ``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY``, ``GITHUB_RUN_ID``)."""
    promoted_from: str | None = None
    """``REPO/SUBFOLDER@SHA`` a promote copied the checkpoint from."""

    @classmethod
    def here(cls, repo: str, subfolder: str, step: int | None, env: Mapping[str, str], *,
             promoted_from: str | None = None, source_commit: str | None = None) -> Provenance:
        """The statement for a folder written now, with what the CI environment tells."""
        commit = source_commit or env.get("GITHUB_SHA") or None
        run = None
        if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
            server = env.get("GITHUB_SERVER_URL") or "https://github.com"
            run = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
            if env.get("GITHUB_RUN_ATTEMPT"):
                run += f"/attempts/{env['GITHUB_RUN_ATTEMPT']}"
        # No time stamp: a re-push of the same checkpoint from the same run writes the same
        # statement, so it stays a no-op (the manifest keeps the time).
        return cls(repo, subfolder, step, commit if commit and _SHA_RE.match(commit) else None,
                   run if run and _RUN_RE.match(run) else None, promoted_from)

    def to_json(self) -> bytes:
        doc: dict[str, object] = {"format": FORMAT, "repo": self.repo, "subfolder": self.subfolder,
                                  "step": self.step, "source_commit": self.source_commit,
                                  "workflow_run": self.workflow_run}
        if self.promoted_from:
            doc["promoted_from"] = self.promoted_from
        return (json.dumps(doc, indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Provenance:
        """Parse a statement that came from the Hub; every field checked (they are printed)."""
        try:
            if len(data) > _MAX_BYTES:
                raise ValueError(f"over {_MAX_BYTES} bytes")
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise ValueError("unknown format")
            fields = {k: doc.get(k) for k in ("repo", "subfolder", "source_commit", "workflow_run", "promoted_from")}
            for key, value in fields.items():
                if value is not None and not (isinstance(value, str) and value.isprintable() and len(value) < 600):
                    raise ValueError(f"{key} is not printable text")
            step = doc.get("step")
            if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
                raise ValueError("step is not a whole number")
            if not fields["repo"] or fields["subfolder"] is None:
                raise ValueError("repo or subfolder is missing")
            if fields["source_commit"] and not _SHA_RE.match(fields["source_commit"]):
                raise ValueError("source_commit is not a commit SHA")
            if fields["workflow_run"] and not _RUN_RE.match(fields["workflow_run"]):
                raise ValueError("workflow_run is not a workflow run URL")
        except (ValueError, RecursionError) as exc:
            raise SignatureError(f"{PROVENANCE_NAME} is unreadable ({exc})") from exc
        return cls(fields["repo"], fields["subfolder"], step, fields["source_commit"], fields["workflow_run"],
                   fields["promoted_from"])

    def check(self, repo: str, subfolder: str, step: int | None) -> None:
        """Refuse a signed checkpoint that was signed for another place or step: a copy of an
        old signed folder is valid bytes, but not this checkpoint."""
        if (self.repo.lower(), self.subfolder) != (repo.lower(), subfolder):  # repo ids: case-insensitive
            raise SignatureError(f"the signed {PROVENANCE_NAME} says it was made for {quoted(self.repo)}/"
                                 f"{quoted(self.subfolder)}, not {repo}/{subfolder}: a signed checkpoint "
                                 "copied where it does not belong")
        if self.step != step:
            raise SignatureError(f"the signed {PROVENANCE_NAME} says step {self.step}, the manifest says {step}")

    def report(self) -> dict[str, object]:
        return {"repo": self.repo, "subfolder": self.subfolder, "step": self.step,
                "source_commit": self.source_commit, "workflow_run": self.workflow_run,
                "promoted_from": self.promoted_from}
