#!/usr/bin/env python3
"""Generate the README's reference sections from the code: action.yml and the CLI.

    python scripts/readme_tables.py            print every generated section
    python scripts/readme_tables.py --check    exit 1 when README.md differs from the code
    python scripts/readme_tables.py --write    rewrite README.md between the markers

Only the text between these marker pairs is generated:

    <!-- action-inputs:start --> ... <!-- action-inputs:end -->      action.yml inputs
    <!-- action-outputs:start --> ... <!-- action-outputs:end -->    action.yml outputs
    <!-- cli-reference:start --> ... <!-- cli-reference:end -->      each command's --help
    <!-- settings:start --> ... <!-- settings:end -->                the retry/timeout knobs
    <!-- example:NAME:start --> ... <!-- example:NAME:end -->        .github/workflows/NAME, as a user
                                                                     writes it (`uses: OWNER/ckpt-action@v1`)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MARKERS = {
    "inputs": ("<!-- action-inputs:start -->", "<!-- action-inputs:end -->"),
    "outputs": ("<!-- action-outputs:start -->", "<!-- action-outputs:end -->"),
    "cli": ("<!-- cli-reference:start -->", "<!-- cli-reference:end -->"),
    "settings": ("<!-- settings:start -->", "<!-- settings:end -->"),
}
WORKFLOWS = ROOT / ".github" / "workflows"
# The runnable workflows the README shows (act runs them in tests/e2e/test_action_act.py).
EXAMPLES = ("example-resume.yml", "example-signed-release.yml", "example-watch.yml")
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


def cli_reference() -> str:
    """Each command's --help, as click renders it at a fixed width."""
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
        ctx = click.Context(cmd, info_name=name, parent=group_ctx, max_content_width=100, terminal_width=100)
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


def example_markers(name: str) -> tuple[str, str]:
    return f"<!-- example:{name}:start -->", f"<!-- example:{name}:end -->"


def examples(workflows: Path = WORKFLOWS) -> dict[str, str]:
    """Each example workflow as a fenced block: the file from its ``name:`` on (the header
    comments describe this repository's copy), ``uses: ./`` as ``uses: OWNER/ckpt-action@v1``."""
    out = {}
    for name in EXAMPLES:
        text = (workflows / name).read_text(encoding="utf-8")
        body = text[text.index("\nname:") + 1:] if "\nname:" in text else text
        body = SELF_USES.sub(lambda m: f"{m.group(1)}uses: OWNER/ckpt-action@v1", body)
        out[name] = f"```yaml\n{body.rstrip()}\n```"
    return out


def markers() -> dict[str, tuple[str, str]]:
    return MARKERS | {name: example_markers(name) for name in EXAMPLES}


def tables(action: dict[str, Any]) -> dict[str, str]:
    return {"inputs": inputs_table(action), "outputs": outputs_table(action), "cli": cli_reference(),
            "settings": settings_table(), **examples()}


def render(readme: str, generated: dict[str, str]) -> str:
    """README text with each marker pair's contents replaced; KeyError names a missing marker."""
    out = readme
    for key, (start, end) in markers().items():
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(out):
            raise KeyError(f"{start} ... {end}")
        block = f"{start}\n{generated[key]}\n{end}"
        out = pattern.sub(lambda _m, block=block: block, out, count=1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 when README.md is out of date")
    group.add_argument("--write", action="store_true", help="rewrite the tables in README.md")
    ap.add_argument("--action", type=Path, default=ROOT / "action.yml")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = ap.parse_args(argv)

    generated = tables(load_action(args.action))
    if not (args.check or args.write):
        for key, (start, end) in markers().items():
            print(start, generated[key], end, "", sep="\n")
        return 0

    if not args.readme.is_file():
        print(f"{args.readme}: missing", file=sys.stderr)
        return 1
    readme = args.readme.read_text(encoding="utf-8")
    try:
        new = render(readme, generated)
    except KeyError as exc:
        print(f"{args.readme}: marker pair not found: {exc.args[0]}", file=sys.stderr)
        return 1
    if args.write:
        if new != readme:
            args.readme.write_text(new, encoding="utf-8")
            print(f"{args.readme}: tables updated")
        return 0
    if new != readme:
        print(
            f"{args.readme}: generated sections differ from {args.action.name} or the CLI; "
            "run: python scripts/readme_tables.py --write",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
