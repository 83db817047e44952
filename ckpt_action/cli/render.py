"""What the CLI prints: lines scrubbed of the token and escaped, warnings and errors as
annotations in GitHub Actions, a command's result everywhere it is wanted (stdout, JSON,
step outputs, job summary, dotenv), and our errors as one line and an exit code, their
parameters spelled as this door spells them (``--tag``, or ``input 'tag'`` for the action)."""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol

import click

from ckpt_action.ci.escaping import escape
from ckpt_action.ci.outputs import (
    append_summary,
    human_lines,
    summary_markdown,
    write_dotenv,
    write_github_output,
    write_json,
)
from ckpt_action.errors import CkptError, Door, render
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


def fail(message: str, code: int) -> NoReturn:
    click.echo(_annotate("error", message), err=True)
    sys.exit(code)


DOOR_KEY = "ckpt_action.door"


def door() -> Door:
    """Who is running the command: a user on the command line, or the GitHub Action."""
    ctx = click.get_current_context(silent=True)
    return "action" if ctx is not None and ctx.meta.get(DOOR_KEY) == "action" else "cli"


def fail_with(exc: CkptError) -> NoReturn:
    """Fail with the error's message, its parameters spelled as this door spells them."""
    fail(exc.render(door()), exc.exit_code)


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
         checkpoints: Callable[[], str] | None = None) -> None:
    """Write the result everywhere it is wanted: stdout, GITHUB_OUTPUT, job summary, dotenv.

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
        write_json(sys.stdout, result)
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
