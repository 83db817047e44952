#!/usr/bin/env python3
"""Generate the copies of the runnable example workflows that the README and the site's
hand-written pages show, and the reference tables the site's reference pages are made of.

    python scripts/readme_tables.py            print every generated copy
    python scripts/readme_tables.py --check    exit 1 when a page's copy differs from its workflow
    python scripts/readme_tables.py --write    rewrite the copies between the markers

Only the text between these marker pairs is generated (PAGES says which page holds which):

    <!-- example:NAME:start --> ... <!-- example:NAME:end -->    .github/workflows/NAME, as a user
                                                                 writes it (`uses: OWNER/ckpt-action@v1`)

The action's inputs and outputs, the CLI's help and the settings are tables of the site's
reference pages (scripts/docs_reference.py writes them from the functions below); the README
links to them and carries none.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
# Each hand-written page and the generated copies it holds ("example:NAME"):
# runnable workflows, which act runs in tests/e2e/test_action_act.py.
PAGES: dict[str, tuple[str, ...]] = {
    "README.md": ("example:example-resume.yml",),
    "docs/guides/buckets.md": ("example:example-bucket.yml",),
    "docs/guides/github-action.md": ("example:example-keyless.yml", "example:example-resume.yml",
                                     "example:example-train-push.yml"),
    "docs/guides/release-pipelines.md": ("example:example-release.yml",),
    "docs/guides/signing.md": ("example:example-signed-release.yml",),
    "docs/guides/watch.md": ("example:example-watch.yml",),
}
EXAMPLES = tuple(sorted({key.split(":", 1)[1] for keys in PAGES.values() for key in keys}))
# In this repository the examples use the action in the checkout; a user's workflow names it.
SELF_USES = re.compile(r"^(\s*(?:- )?)uses: \./(?: #.*)?$", re.M)
# The order a reader meets the commands in: the main job first, then release, then tools.
COMMAND_ORDER = ("push", "latest", "pull", "promote", "list", "prune", "watch", "local-hub", "demo")


def _cell(text: Any) -> str:
    """One Markdown table cell: a single line, pipes escaped."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|")


def _code(value: str) -> str:
    if value == "":
        return '`""`'
    return "`" + value.replace("`", "") + "`"


def load_action(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: not a mapping")
    return data


def inputs_table(action: dict[str, Any]) -> str:
    rows = ["| Input | Description | Required | Default |", "| --- | --- | --- | --- |"]
    for name, spec in (action.get("inputs") or {}).items():
        spec = spec or {}
        required = "yes" if spec.get("required") else "no"
        default = spec.get("default")
        default_cell = "" if default is None else _code(str(default))
        rows.append(f"| `{name}` | {_cell(spec.get('description', ''))} | {required} | {default_cell} |")
    return "\n".join(rows)


def outputs_table(action: dict[str, Any]) -> str:
    rows = ["| Output | Description |", "| --- | --- |"]
    for name, spec in (action.get("outputs") or {}).items():
        rows.append(f"| `{name}` | {_cell((spec or {}).get('description', ''))} |")
    return "\n".join(rows)


PAGE_WIDTH = 80
"""Characters a line of a code block on the site may hold: Material's content column with both
sidebars (61rem less 2 x 12.1rem and the margins, at 20 px a rem) shows 80 of its code font
(0.85 x 16 px Roboto Mono, 0.6 em a character) without a scroll bar. tests/unit/test_docs_width.py."""


def cli_reference() -> str:
    """Each command's --help, as click renders it at a fixed width: the site's page width (``PAGE_WIDTH``)."""
    import click

    sys.path.insert(0, str(ROOT))
    from ckpt_action.cli import app as cli

    parts = []
    # The group's own settings (``-h``), inherited as when ``ckpt-action NAME --help`` runs:
    # a context built without them would render whatever help option Click cached on the
    # command first, so the text would depend on what ran before in the process.
    group_ctx = click.Context(cli.cli, info_name="ckpt-action", **cli.cli.context_settings)
    for name in COMMAND_ORDER:
        cmd = cli.cli.get_command(group_ctx, name)
        assert cmd is not None, name
        ctx = click.Context(cmd, info_name=name, parent=group_ctx, max_content_width=PAGE_WIDTH,
                            terminal_width=PAGE_WIDTH)
        ctx.help_option_names = list(group_ctx.help_option_names)
        cmd._help_option = None  # type: ignore[attr-defined]  # Click caches it per command: rebuilt for this context
        parts.append(f"#### `{name}`\n\n```text\n{cmd.get_help(ctx)}\n```")
    commands = {n: cli.cli.get_command(group_ctx, n) for n in cli.cli.list_commands(group_ctx)}
    shown = {n for n, c in commands.items() if c is not None and not c.hidden}
    missing = shown - set(COMMAND_ORDER)
    if missing:
        raise SystemExit(f"commands missing from COMMAND_ORDER: {sorted(missing)}")
    return "\n\n".join(parts)


def settings_table() -> str:
    sys.path.insert(0, str(ROOT))
    from ckpt_action.disk.cache import CacheConfig
    from ckpt_action.settings import Settings

    rows = ["| Setting | Flag / variable | Default | Meaning |", "| --- | --- | --- | --- |"]
    flags = {"timeout": "--timeout / ", "retries": "--retries / ", "cache_dir": "--cache-dir / "}
    for name, env, default, doc in [*Settings.knobs(), *CacheConfig.knobs()]:
        rows.append(f"| `{name}` | {flags.get(name, '')}`{env}` | `{default}` | {_cell(doc)} |")
    return "\n".join(rows)


def markers_of(key: str) -> tuple[str, str]:
    """The marker pair around one generated copy: ``example:NAME``."""
    return f"<!-- {key}:start -->", f"<!-- {key}:end -->"


def example_markers(name: str) -> tuple[str, str]:
    return markers_of(f"example:{name}")


def _as_users(text: str) -> str:
    return SELF_USES.sub(lambda m: f"{m.group(1)}uses: OWNER/ckpt-action@v1", text)


def examples(workflows: Path = WORKFLOWS) -> dict[str, str]:
    """Each example workflow as a fenced block: the file from its ``name:`` on (the header
    comments describe this repository's copy), ``uses: ./`` as ``uses: OWNER/ckpt-action@v1``."""
    out = {}
    for name in EXAMPLES:
        text = (workflows / name).read_text(encoding="utf-8")
        body = text[text.index("\nname:") + 1:] if "\nname:" in text else text
        out[name] = f"```yaml\n{_as_users(body).rstrip()}\n```"
    return out


def generated(key: str) -> str:
    kind, name = key.split(":", 1)
    if kind == "example":
        return examples()[name]
    raise KeyError(key)


def tables(action: dict[str, Any]) -> dict[str, str]:
    """Every reference table and generated copy, by its key (what a bare run prints)."""
    return {"inputs": inputs_table(action), "outputs": outputs_table(action), "cli": cli_reference(),
            "settings": settings_table(), **{key: generated(key) for keys in PAGES.values() for key in keys}}


def render(page: str, keys: tuple[str, ...]) -> str:
    """A page's text with each of its copies regenerated; KeyError names a missing marker pair."""
    out = page
    for key in keys:
        start, end = markers_of(key)
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(out):
            raise KeyError(f"{start} ... {end}")
        block = f"{start}\n{generated(key)}\n{end}"
        out = pattern.sub(lambda _m, block=block: block, out, count=1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 when a page's copy is out of date")
    group.add_argument("--write", action="store_true", help="rewrite the copies in the pages")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose pages (PAGES) are checked")
    args = ap.parse_args(argv)

    if not (args.check or args.write):
        for keys in PAGES.values():
            for key in keys:
                print(*markers_of(key), generated(key), "", sep="\n")
        return 0

    stale = []
    for rel, keys in PAGES.items():
        path = args.root / rel
        if not path.is_file():
            print(f"{rel}: missing", file=sys.stderr)
            return 1
        text = path.read_text(encoding="utf-8")
        try:
            new = render(text, keys)
        except KeyError as exc:
            print(f"{rel}: marker pair not found: {exc.args[0]}", file=sys.stderr)
            return 1
        if new == text:
            continue
        stale.append(rel)
        if args.write:
            path.write_text(new, encoding="utf-8")
            print(f"{rel}: copies updated")
    if args.check and stale:
        print(f"{', '.join(stale)}: generated copies differ from .github/workflows; "
              "run: python scripts/readme_tables.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
