"""CI output adapters: one result, written for GitHub Actions, GitLab CI and JSON readers.

:data:`OUTPUTS` declares every output a command can write, with the description
``action.yml`` repeats (a test holds the two together). Names are a contract (workflows
read them): step outputs use kebab-case (``hub-url``), JSON uses snake_case
(``hub_url``), dotenv uses ``CKPT_`` + upper snake case. Every value is validated by
the core before it gets here, and escaped here for the channel it goes to.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ckpt_action.ci.escaping import escape
from ckpt_action.disk.access import not_writable_hint
from ckpt_action.errors import InputError, param

if TYPE_CHECKING:
    from ckpt_action.ops.discover import LatestResult
    from ckpt_action.ops.prune import ListResult, PruneResult
    from ckpt_action.ops.pull import PullResult
    from ckpt_action.ops.push import PushResult
    from ckpt_action.ops.release import PromoteResult


OUTPUTS: dict[str, str] = {
    "repo": "Hub repo id the command acted on.",
    "subfolder": "Checkpoint folder pushed, found or pulled (`list`: the newest complete checkpoint-N).",
    "revision": "40-hex commit SHA the checkpoint is pinned to (`list`: the SHA that was read; `prune`: the SHA "
                "of the prune commit, or the SHA that was read when nothing was deleted or with `dry-run`).",
    "step": "Training step of the checkpoint, when known.",
    "hub-url": "URL of the checkpoint folder at the pinned commit.",
    "local-dir": "Local directory uploaded from or downloaded into.",
    "found": "`true` when a checkpoint was found (`latest`, `pull`, `list`), else `false`.",
    "verified": "`latest`: `true` when the checkpoint was checked against its manifest, `false` for a folder "
                "without one (written by another tool).",
    "commits": "`push`, `promote`: commits made (0 when the content was already there).",
    "uploaded-files": "`push`: files uploaded.",
    "deleted-files": "`push`: stale files removed from the folder.",
    "files": "`pull`: files in the pulled checkpoint (or the part of it selected).",
    "bytes": "`pull`: bytes in the pulled checkpoint (or the part of it selected).",
    "verified-by": "`pull`: what every file was checked against: `manifest`, or `tree` for a folder without "
                   "a manifest (the hashes the Hub lists).",
    "partial": "`pull`: `true` when `include`/`exclude` selected part of the checkpoint.",
    "downloaded-files": "`pull`: files downloaded (the others were reused).",
    "downloaded-bytes": "`pull`: bytes downloaded.",
    "reused-files": "`pull`: files kept from the earlier pull in `local-dir` without downloading them.",
    "cached-files": "`pull`: files filled from `cache-dir` without downloading them.",
    "removed-files": "`pull`: files of the earlier pull in `local-dir` that the checkpoint no longer has.",
    "source-subfolder": "`promote`: the checkpoint folder that was promoted.",
    "source-revision": "`promote`: the SHA the promoted checkpoint was read at.",
    "tag": "`promote`: the tag created (or found) on the promoted commit.",
    "branch": "`promote`: the branch the promotion was committed on.",
    "count": "`list`: how many folders `checkpoints` lists: every `checkpoint-N`, complete or not, and other "
             "checkpoint folders such as `sft` or a promoted `release`.",
    "checkpoints": "`list`: the checkpoints as a JSON array (subfolder, step, complete, status, files, size, "
                   "revision, source, metrics, metrics_problem, signed).",
    "dry-run": "`prune`: `true` when nothing was deleted on purpose.",
    "deleted": "`prune`: the folders deleted (or, with dry-run, that would be), as a JSON array.",
    "kept": "`prune`: the checkpoint-N folders kept, as a JSON array.",
    "kept-reasons": "`prune`: each kept checkpoint-N with why it is kept (`subfolder`, `reason`), as a JSON array.",
    "deleted-count": "`prune`: how many folders were deleted (with `dry-run`: would be).",
    "freed-bytes": "`prune` with free-storage: bytes of Hub storage freed (the Hub's usage before minus after; "
                   "with dry-run, the bytes that would be freed).",
    "used-storage-before": "`prune` with free-storage: the repo's Hub storage in bytes before the prune.",
    "used-storage-after": "`prune` with free-storage: the repo's Hub storage in bytes after it (empty for a "
                          "dry run).",
    "signed": "`push`, `promote`, `pull`: `true` when the folder is signed (push and promote wrote `model.sig`; "
              "pull found one).",
    "signer": "`push`, `promote`, `pull`: who signed (`key sha256:...`, the certificate's subject, or the keyless "
              "identity); pull writes it only when `verify-*` checked the signature.",
    "signature-verified": "`pull`: `true` when `model.sig` was checked against `verify-key`, "
                          "`verify-certificate-chain` or `verify-identity` (and covered every byte pulled).",
    "provenance": "`pull`: the signed provenance statement as JSON (repo, subfolder, step, source_commit, "
                  "workflow_run, promoted_from), when verified; empty otherwise.",
    "wandb-artifact": "`push`, `promote`: the W&B pointer artifact logged (empty when W&B logging failed or "
                      "was not asked for).",
    "wandb-run-id": "`push`, `promote`: the W&B run the pointer was logged to.",
    "best-metric": "`latest`, `promote` with `best`: the metric that chose the checkpoint.",
    "best-value": "`latest`, `promote` with `best`: that metric's value in the chosen checkpoint, a number.",
}

KINDS: dict[str, str] = {
    "repo": "text", "subfolder": "text", "revision": "sha", "step": "int", "hub-url": "text", "local-dir": "text",
    "found": "bool", "verified": "bool", "commits": "int", "uploaded-files": "int", "deleted-files": "int",
    "files": "int", "bytes": "int", "verified-by": "text", "partial": "bool", "downloaded-files": "int",
    "downloaded-bytes": "int", "reused-files": "int", "cached-files": "int", "removed-files": "int",
    "source-subfolder": "text", "source-revision": "sha", "tag": "text", "branch": "text", "count": "int",
    "checkpoints": "json-array", "dry-run": "bool", "deleted": "json-array", "kept": "json-array",
    "kept-reasons": "json-array", "deleted-count": "int", "freed-bytes": "int", "used-storage-before": "int",
    "used-storage-after": "int",
    "signed": "bool", "signer": "text", "signature-verified": "bool", "provenance": "text",
    "wandb-artifact": "text", "wandb-run-id": "text", "best-metric": "text", "best-value": "number",
}
"""The type of each output's value (``sha``: 40 lowercase hex; ``int``: a whole number; ``bool``:
``true``/``false``; ``json-array``: a JSON array, for ``fromJSON``; ``number``: a finite decimal
number), as its description says."""


# Each command's result as its outputs (snake_case keys). A key a mode does not have is left
# out, and so is a value that is None (unknown here, e.g. the step of a folder pushed without
# one): outputs are written only where they apply, never as "None" or null.

def push_outputs(res: PushResult) -> dict[str, Any]:
    return res.handle.to_dict() | {"local_dir": str(res.local_dir), "commits": res.commits,
                                   "uploaded_files": res.uploaded_files, "deleted_files": res.deleted_files,
                                   "signed": res.signer is not None, "signer": res.signer}


def latest_outputs(repo: str, res: LatestResult) -> dict[str, Any]:
    if res.handle is None:
        return {"repo": repo, "revision": res.revision, "found": False}
    return res.handle.to_dict() | {"found": True, "verified": res.has_manifest} | _chosen_by(res.chosen_by)


def _chosen_by(chosen_by: tuple[str, float] | None) -> dict[str, Any]:
    """The metric and value that chose a checkpoint (``--best``), when one did."""
    return {"best_metric": chosen_by[0], "best_value": chosen_by[1]} if chosen_by else {}


def pull_outputs(res: PullResult) -> dict[str, Any]:
    return res.handle.to_dict() | {
        "local_dir": str(res.local_dir), "found": True, "files": res.files, "bytes": res.bytes,
        "verified_by": res.verified_by, "partial": res.partial, "downloaded_files": res.downloaded_files,
        "downloaded_bytes": res.downloaded_bytes, "reused_files": res.reused_files,
        "cached_files": res.cached_files, "removed_files": res.removed_files, "signed": res.signed,
        "signer": res.signer, "signature_verified": res.signature_verified, "provenance": res.provenance}


def promote_outputs(res: PromoteResult) -> dict[str, Any]:
    return res.handle.to_dict() | {
        "source_subfolder": res.source.subfolder, "source_revision": res.source.revision,
        "commits": res.commits, "tag": res.tag, "branch": res.branch, "signed": res.signer is not None,
        "signer": res.signer} | _chosen_by(res.chosen_by)


def list_outputs(res: ListResult) -> dict[str, Any]:
    repo, sha, infos = res.repo, res.revision, res.checkpoints
    newest = next((i for i in infos if i.complete and i.step is not None and i.subfolder.startswith("checkpoint-")),
                  None)
    return {"repo": repo, "subfolder": newest.subfolder if newest else None, "revision": sha,
            "step": newest.step if newest else None, "found": bool(infos), "count": len(infos),
            "checkpoints": [i.to_dict() for i in infos]}


def prune_outputs(res: PruneResult) -> dict[str, Any]:
    out = {"repo": res.repo, "revision": res.revision, "dry_run": res.dry_run, "deleted": res.deleted,
           "kept": list(res.kept), "deleted_count": len(res.deleted),
           "kept_reasons": [{"subfolder": name, "reason": why} for name, why in res.kept.items()]}
    if res.free_storage:
        out |= {"freed_bytes": res.freed_bytes, "used_storage_before": res.used_storage_before,
                "used_storage_after": res.used_storage_after}
    return out


def output_name(key: str) -> str:
    """The step output name of a result key: ``hub_url`` -> ``hub-url``."""
    return key.replace("_", "-")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def applicable(result: Mapping[str, object]) -> dict[str, object]:
    """The outputs a result has: its keys whose value is known (None is left out).

    >>> applicable({"repo": "o/r", "step": None, "found": False})
    {'repo': 'o/r', 'found': False}
    """
    return {key: value for key, value in result.items() if value is not None}


def human_lines(result: Mapping[str, object]) -> list[str]:
    """``key: value`` lines for a terminal, with values as the step outputs have them (``true``)."""
    return [f"{key}: {_text(value)}" for key, value in applicable(result).items()
            if not isinstance(value, (list, dict))]


def step_outputs(result: Mapping[str, object]) -> dict[str, str]:
    """The step outputs for a result, as text: only the ones it has, booleans as ``true``/``false``.

    >>> step_outputs({"repo": "o/r", "found": False, "step": None, "count": 2})
    {'repo': 'o/r', 'found': 'false', 'count': '2'}
    """
    out = {}
    for key, value in applicable(result).items():
        name = output_name(key)
        if name not in OUTPUTS:
            raise AssertionError(f"output {name} is not declared in outputs.OUTPUTS")
        out[name] = _text(value)
    return out


def write_github_output(path: str | os.PathLike[str], result: Mapping[str, object]) -> None:
    """Append outputs in the multi-line form, with a delimiter no value contains."""
    lines = []
    for name, value in step_outputs(result).items():
        delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        while delimiter in value:  # pragma: no cover - astronomically unlikely
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))


def dotenv_lines(result: Mapping[str, object]) -> str:
    """GitLab ``artifacts:reports:dotenv`` lines: ``CKPT_REVISION=…``, one line each.

    >>> dotenv_lines({"repo": "o/r", "step": 5}).splitlines()
    ['CKPT_REPO=o/r', 'CKPT_STEP=5']
    """
    out = []
    for name, value in step_outputs(result).items():
        out.append(f"CKPT_{name.upper().replace('-', '_')}={escape(value, 'dotenv')}")
    return "\n".join(out) + "\n"


def check_writable(path: str | os.PathLike[str], name: str) -> None:
    """Refuse an output file (the parameter ``name``, e.g. ``dotenv``) that cannot be
    written, before any work is done."""
    target = Path(path)
    what = param(name)
    if target.is_dir():
        raise InputError(f"{what} {target} is a directory: name a file", param=name)
    parent = target.absolute().parent
    if not parent.is_dir():
        raise InputError(f"{what} {target}: its directory does not exist: create it first", param=name)
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"{what} {target} is not writable: choose another path{not_writable_hint()}", param=name)


def write_dotenv(path: str | os.PathLike[str], result: Mapping[str, object]) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(dotenv_lines(result), encoding="utf-8")
    os.replace(tmp, target)


def write_json(stream: TextIO, result: Mapping[str, object]) -> None:
    stream.write(json.dumps(applicable(result), sort_keys=False) + "\n")
    stream.flush()


def _code(value: object) -> str:
    return f"<code>{escape(value, 'markdown')}</code>"


def _size(value: object) -> str:
    from ckpt_action.progress import human

    return human(value) if isinstance(value, int) else ""


def summary_markdown(command: str, result: Mapping[str, object], checkpoints: str = "") -> str:
    """A job-summary section: what moved, the step, and a link to the pinned commit; then
    ``checkpoints``, the repo's checkpoints as the model card shows them (:func:`checkpoints_table`).

    Every value is escaped for Markdown: a folder or metric name cannot add a row, a link or HTML.
    """
    repo, sub, rev = result.get("repo"), result.get("subfolder"), result.get("revision")
    head = f"### ckpt-action {command}"
    if command == "latest" and not result.get("found"):
        return f"{head}\n\nNo complete checkpoint in {_code(repo)}: the job starts from scratch.\n"
    rows = [("repo", _code(repo))]
    if sub and command != "list":
        rows.append(("subfolder", _code(f"{sub}/")))
    if result.get("step") is not None and command != "list":
        rows.append(("step", escape(result.get("step"), "markdown")))
    if rev:
        url = str(result.get("hub_url") or "")
        short = escape(str(rev)[:12], "markdown")
        # hub_url is built by ckpt-action from validated parts; quoted so it stays one link target.
        rows.append(("commit", f"[<code>{short}</code>](<{escape(url, 'markdown')}>)" if url else _code(rev)))
    if result.get("local_dir"):
        rows.append(("local dir", _code(result.get("local_dir"))))
    for key in ("uploaded_files", "deleted_files", "commits", "files", "bytes", "tag", "count", "best_metric",
                "best_value"):
        if result.get(key) is not None:
            rows.append((key.replace("_", " "), escape(result[key], "markdown")))
    table = "| | |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    return f"{head}\n\n{table}{_extra(command, result)}{checkpoints}\n"


def checkpoints_table(listing: ListResult, tags: Mapping[str, Sequence[str]] | None = None) -> str:
    """The model card's table of the checkpoints ``listing`` read, for the job summary: the
    card's one renderer (:func:`ckpt_action.ops.card.table`), each value escaped for the
    summary. Its tags column: the listing's (``list(..., tags=True)``) and ``tags`` (folder ->
    tags this command made)."""
    from ckpt_action.ops.card import ordered, rows_at, table

    if listing.revision is None or not listing.checkpoints:
        return "\nNo checkpoints.\n"
    signed = {i.subfolder for i in listing.checkpoints if i.signed}
    made = {name: sorted({*(listing.tags or {}).get(name, ()), *(tags or {}).get(name, ())})
            for name in {*(listing.tags or {}), *(tags or {})}}
    rows = ordered(rows_at(listing.checkpoints, listing.revision, made, signed))
    return "\n" + table(rows, text=lambda value: escape(value, "markdown"))


def _extra(command: str, result: Mapping[str, object]) -> str:
    if command == "prune":
        deleted = result.get("deleted") or []
        assert isinstance(deleted, list)
        verb = "would delete" if result.get("dry_run") else "deleted"
        lines = "".join(f"- {verb} {_code(f'{n}/')}\n" for n in deleted) if deleted else "Nothing to delete.\n"
        reasons = result.get("kept_reasons") or []
        assert isinstance(reasons, list)
        for row in reasons:
            assert isinstance(row, dict)
            lines += f"- kept {_code(str(row['subfolder']) + '/')}: {escape(row['reason'], 'markdown')}\n"
        if result.get("freed_bytes") is not None:
            freed = "would free" if result.get("dry_run") else "freed"
            lines += f"- {freed} {_size(result['freed_bytes'])} of Hub storage\n"
        return "\n" + lines
    return ""


def append_summary(path: str | os.PathLike[str], markdown: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown + "\n")
