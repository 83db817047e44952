"""What the CLI prints: lines scrubbed of the token and escaped, warnings and errors as
annotations in GitHub Actions, a command's result everywhere it is wanted (stdout, JSON,
step outputs, job summary, dotenv), and our errors as one line and an exit code, their
parameters spelled as this door spells them (``--tag``, or ``input 'tag'`` for the action)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, Protocol

import click

from ckpt_action.ci.escaping import escape
from ckpt_action.ci.outputs import (
    append_summary,
    applicable,
    human_lines,
    summary_markdown,
    write_dotenv,
    write_github_output,
    write_json,
)
from ckpt_action.errors import CkptError, Door, render, spell
from ckpt_action.errors import scrub as scrub_secrets

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_NONE = 0, 1, 2, 3


# The command's token, kept in its Click context (one per invocation, passed down by Click),
# so every printed line can be scrubbed of it: no class or module state outlives a command.
SECRET_KEY = "ckpt_action.secret"  # noqa: S105 - a key of ctx.meta, not a secret


def scrub(text: str) -> str:
    """``text`` without the command's token, nor ``HF_TOKEN`` (read now, not at import)."""
    ctx = click.get_current_context(silent=True)
    secrets = {ctx.meta.get(SECRET_KEY) if ctx is not None else None, os.environ.get("HF_TOKEN")}
    return scrub_secrets(text, [s for s in secrets if s])


class _AnnotationHandler(logging.Handler):
    """Log records (ours and the client's) as warning lines: ``::warning::`` in Actions,
    scrubbed of the token and escaped like everything else printed."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(_annotate("warning", f"{record.name}: {record.getMessage()}"), err=True)
        except Exception:  # noqa: BLE001 - logging must never take the command down
            self.handleError(record)


def _in_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _annotate(kind: str, message: str) -> str:
    message = scrub(" ".join(str(message).split()))
    if _in_actions():
        return f"::{kind}::{escape(message, 'annotation')}"
    return f"{kind}: {escape(message)}"


def warn(message: str) -> None:
    """A warning line, its parameter references spelled as this door spells them."""
    click.echo(_annotate("warning", render(message, door())), err=True)


def note(message: str) -> None:
    """A note line (``::notice::`` in Actions): something done that the user did not ask for in words."""
    click.echo(_annotate("notice", render(message, door())), err=True)


# With --json, an error is one JSON object on stdout too (``error``, ``exit_code``, ``option``):
# whether this command was asked for JSON, and the result a failing command has already made
# (``latest --require``'s outputs), which the error's object carries instead of a second object.
_JSON_ASKED: contextvars.ContextVar[bool] = contextvars.ContextVar("ckpt_action_json_asked", default=False)
_RESULT_KEY = "ckpt_action.result"  # ctx.meta: a result kept for the error's JSON object
_WRITTEN_KEY = "ckpt_action.json_written"  # ctx.meta: this command's one JSON object is out


@contextlib.contextmanager
def json_asked(asked: bool) -> Iterator[None]:
    """Inside, the command being run was given ``--json`` (seen among its arguments by
    ``run``, before Click parses them): for this invocation only, not a process setting."""
    token = _JSON_ASKED.set(asked)
    try:
        yield
    finally:
        _JSON_ASKED.reset(token)


def json_wanted() -> bool:
    """Whether the command running asked for ``--json`` (parsed, or seen in its arguments)."""
    if _JSON_ASKED.get():
        return True
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json"):
            return True
        ctx = ctx.parent
    return False


def error_object(message: str, code: int, option: str | None) -> dict[str, Any]:
    """The JSON object an error prints on stdout with ``--json``: the result the command had
    made, if any (``latest --require``: ``found: false``), then ``error`` (the stderr line's
    message), ``exit_code`` and ``option`` (the option it names, as spelled, or null)."""
    ctx = click.get_current_context(silent=True)
    kept = applicable(ctx.meta.get(_RESULT_KEY) or {}) if ctx is not None else {}
    return {**kept, "error": scrub(" ".join(str(message).split())), "exit_code": code, "option": option}


def print_json(result: dict[str, Any], *, failing: bool = False) -> None:
    """The command's one JSON object on stdout; ``failing`` (an error exit follows): kept for
    the error's object, which carries it (:func:`error_object`), instead of a second object."""
    ctx = click.get_current_context(silent=True)
    if failing and ctx is not None:
        ctx.meta[_RESULT_KEY] = dict(result)
        return
    write_json(sys.stdout, result)
    if ctx is not None:
        ctx.meta[_WRITTEN_KEY] = True


def fail(message: str, code: int, *, option: str | None = None, as_json: bool | None = None) -> NoReturn:
    """Exit ``code`` with ``message`` as one error line on stderr; with ``--json`` (or
    ``as_json``) also one JSON object on stdout (:func:`error_object`), unless the command's
    one object is already out. ``option`` is the option the error names, as this door spells it."""
    click.echo(_annotate("error", message), err=True)
    ctx = click.get_current_context(silent=True)
    if (json_wanted() if as_json is None else as_json) and not (ctx is not None and ctx.meta.get(_WRITTEN_KEY)):
        # every key, null ones too: a script reads `option` without checking it is there
        sys.stdout.write(json.dumps(error_object(message, code, option)) + "\n")
        sys.stdout.flush()
    sys.exit(code)


DOOR_KEY = "ckpt_action.door"


def door() -> Door:
    """Who is running the command: a user on the command line, or the GitHub Action."""
    ctx = click.get_current_context(silent=True)
    return "action" if ctx is not None and ctx.meta.get(DOOR_KEY) == "action" else "cli"


def fail_with(exc: CkptError) -> NoReturn:
    """Fail with the error's message, its parameters spelled as this door spells them."""
    fail(exc.render(door()), exc.exit_code, option=spell(exc.param, door()) if exc.param else None)


def echo(text: str, *, err: bool = False) -> None:
    """Print one line built from values that may come from the Hub or the user."""
    click.echo(escape(scrub(text)), err=err)


def setup_logging() -> None:
    """Log records as warning lines (:class:`_AnnotationHandler`), and Python warnings too: a
    library's warning may carry what a server said (the Hub's remarks on a model card), so it
    is printed escaped, on one line, like everything else."""
    root = logging.getLogger()
    root.handlers[:] = [_AnnotationHandler()]
    root.setLevel(logging.WARNING)
    warnings.showwarning = _show_warning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A Python warning as a log record, so :class:`_AnnotationHandler` prints it, named for
    the package that warned (``huggingface_hub: …``), not ``py.warnings: UserWarning: …``."""
    parts = Path(filename).parts
    package = parts[parts.index("site-packages") + 1] if "site-packages" in parts[:-1] else "python"
    kind = "" if category is UserWarning else f"{category.__name__}: "
    logging.getLogger(package.removesuffix(".py")).warning("%s%s", kind, message)


def route_client_logs() -> None:
    """huggingface_hub adds its own stderr handler when imported, which would print each
    warning twice and skip the token scrubbing: send its records through ours only."""
    import huggingface_hub  # noqa: F401 - its import is what installs the handler

    logging.getLogger("huggingface_hub").handlers[:] = []


class Destinations(Protocol):
    """Where a result goes besides stdout (``options.HubOptions`` is one): printing needs
    only these, so this module imports nothing of the options above it."""

    @property
    def as_json(self) -> bool: ...

    @property
    def dotenv(self) -> str | None: ...


def emit(command: str, result: dict[str, Any], hub: Destinations, human: Callable[[], None] | None = None,
         checkpoints: Callable[[], str] | None = None, *, failing: bool = False) -> None:
    """Write the result everywhere it is wanted: stdout, GITHUB_OUTPUT, job summary, dotenv.

    ``failing``: the command exits with an error next (``latest --require``), whose one JSON
    object (``--json``) carries the result rather than a second object.

    ``human`` prints the terminal form when it is not a plain ``key: value`` list;
    ``checkpoints`` reads and renders the model card's table the job summary shows (called
    only when there is a summary to write: :func:`~ckpt_action.ci.outputs.checkpoints_table`).
    """
    if os.environ.get("GITHUB_OUTPUT"):
        write_github_output(os.environ["GITHUB_OUTPUT"], result)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        table = ""
        if checkpoints is not None:
            try:
                table = checkpoints()
            except CkptError as e:  # the command did its work: the summary goes without the table
                warn(f"the job summary has no table of checkpoints: {e}")
        append_summary(os.environ["GITHUB_STEP_SUMMARY"], summary_markdown(command, result, table))
    if hub.dotenv:
        write_dotenv(hub.dotenv, result)
    if hub.as_json:
        print_json(result, failing=failing)
    elif human is not None:
        human()
    else:
        for line in human_lines(result):
            echo(line)


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn our errors into one stderr line and the exit code the error class carries."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except CkptError as exc:
            fail_with(exc)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except OSError as exc:
            fail(f"{type(exc).__name__}: {exc}", EXIT_FAIL)
        except Exception as exc:
            if os.environ.get("CKPT_DEBUG"):
                raise
            fail(f"unexpected {type(exc).__name__}: {exc} (set CKPT_DEBUG=1 for a traceback)", EXIT_FAIL)

    return wrapper
