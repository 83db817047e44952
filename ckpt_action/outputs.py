"""CI output adapters: one result, written for GitHub Actions, GitLab CI and JSON readers.

Names are a contract (workflows read them): step outputs use kebab-case (``hub-url``),
JSON uses snake_case (``hub_url``), dotenv uses ``CKPT_`` + upper snake case.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from .errors import InputError

OUTPUT_KEYS = ("repo", "subfolder", "revision", "step", "hub_url", "local_dir", "found")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def step_outputs(result: Mapping[str, object]) -> dict[str, str]:
    """The GitHub step outputs for a result: every contract key, kebab-case, as text.

    >>> step_outputs({"repo": "o/r", "found": False, "hub_url": "u"})["hub-url"]
    'u'
    """
    out = {key.replace("_", "-"): _text(result.get(key)) for key in OUTPUT_KEYS}
    for key, value in result.items():
        if key not in OUTPUT_KEYS and isinstance(value, (str, int, bool)) and value is not None:
            out[key.replace("_", "-")] = _text(value)
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
    """GitLab ``artifacts:reports:dotenv`` lines: ``CKPT_REVISION=…``, single-line values only.

    >>> dotenv_lines({"repo": "o/r", "step": 5}).splitlines()[:2]
    ['CKPT_REPO=o/r', 'CKPT_SUBFOLDER=']
    """
    out = []
    for name, value in step_outputs(result).items():
        if "\n" in value or "\r" in value:
            raise InputError(f"output {name} spans lines and cannot go in a dotenv file")
        out.append(f"CKPT_{name.upper().replace('-', '_')}={value}")
    return "\n".join(out) + "\n"


def write_dotenv(path: str | os.PathLike[str], result: Mapping[str, object]) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(dotenv_lines(result), encoding="utf-8")
    os.replace(tmp, target)


def write_json(stream: TextIO, result: Mapping[str, object]) -> None:
    stream.write(json.dumps(dict(result), sort_keys=False) + "\n")
    stream.flush()


def summary_markdown(command: str, result: Mapping[str, object]) -> str:
    """A job-summary section: what moved, the step, and a link to the pinned commit."""
    repo, sub, rev = result.get("repo"), result.get("subfolder"), result.get("revision")
    head = f"### ckpt-action {command}"
    if command == "latest" and not result.get("found"):
        return f"{head}\n\nNo complete checkpoint in `{repo}`: the job starts from scratch.\n"
    rows = [("repo", f"`{repo}`")]
    if sub:
        rows.append(("subfolder", f"`{sub}/`"))
    if result.get("step") is not None:
        rows.append(("step", str(result.get("step"))))
    if rev:
        url = result.get("hub_url") or ""
        rows.append(("commit", f"[`{str(rev)[:12]}`]({url})" if url else f"`{rev}`"))
    if result.get("local_dir"):
        rows.append(("local dir", f"`{result.get('local_dir')}`"))
    for key in ("uploaded_files", "deleted_files", "commits", "files", "bytes", "tag", "target"):
        if key in result and result[key] is not None:
            rows.append((key.replace("_", " "), str(result[key])))
    table = "| | |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    extra = str(result.get("summary_extra") or "")
    return f"{head}\n\n{table}{extra}\n"


def append_summary(path: str | os.PathLike[str], markdown: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown + "\n")
