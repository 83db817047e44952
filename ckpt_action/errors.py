"""One error hierarchy; each class carries the process exit code the CLI uses.

Messages are one line and say what to change. They never contain a token: the CLI
scrubs the token from anything it prints, and the core never formats one in.

A message names the parameters it is about with :func:`param` (``param("tag")``), never as
one door spells them: the door that raised renders each as its users know it
(:meth:`CkptError.render`): ``--tag`` on the command line, ``tag=`` in Python (``str()``
of the error), ``input 'tag'`` in the GitHub Action.
"""

from __future__ import annotations

import re
from typing import Literal

Door = Literal["api", "cli", "action"]
# A parameter reference inside a message: control characters, which no quoted value
# (repr, quoted()) can contain, so a name the Hub or the user sent cannot pass for one.
_START, _END = "\x02", "\x03"
_REF_RE = re.compile("\x02([a-z_]+)\x03( (?=['\"]))?")


def param(name: str) -> str:
    """A reference to the parameter ``name`` (its Python spelling, ``local_dir``) for a message."""
    return f"{_START}{name}{_END}"


def spell(name: str, door: Door) -> str:
    """How the door spells a parameter: ``--local-dir``, ``local_dir=``, ``input 'local-dir'``."""
    if door == "cli":
        return "--" + name.replace("_", "-")
    if door == "action":
        return f"input '{name.replace('_', '-')}'"
    return f"{name}="


def render(message: str, door: Door) -> str:
    """``message`` with its parameter references spelled for ``door``; in Python a value
    right after the name joins it (``tag='bad tag'``)."""
    def one(m: re.Match[str]) -> str:
        spelled = spell(m.group(1), door)
        if m.group(2) and door != "api":
            spelled += " "
        return spelled

    return _REF_RE.sub(one, message)


class CkptError(Exception):
    """Base of every error ckpt-action raises on purpose. Exit code 1.

    ``param`` names the parameter the error is about, when there is one (``"tag"``).
    """

    exit_code = 1

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param

    def render(self, door: Door) -> str:
        """The message as the door that raised shows it."""
        return render(super().__str__(), door)

    def __str__(self) -> str:
        return self.render("api")


class InputError(CkptError):
    """The user's input is wrong. Exit code 2. Most are raised before any request; the few that
    need the Hub's answer (a selection that matches none of its files) before anything is written."""

    exit_code = 2


class RemoteError(CkptError):
    """The Hub (or the network to it) failed after bounded retries. Exit code 1."""


class AuthError(RemoteError):
    """The Hub refused the credentials (401/403)."""


class NotFoundError(RemoteError):
    """A repo, revision or path does not exist on the Hub."""


class IntegrityError(CkptError):
    """Downloaded or remote content does not match what it claims to be, or the Hub
    answered something malformed (a commit id that is not 40 hex, a broken listing)."""


class UnreadableManifest(IntegrityError):
    """One folder's ``ckpt-manifest.json`` cannot be used (not JSON, unknown format, bad
    fields, too big). Listing commands skip that folder; reading it is refused."""


class LimitError(CkptError):
    """The Hub's answer went past a bound (pages, entries, bytes of a listing). The message
    names the bound and the setting that raises it. Exit code 1."""


class NoCheckpointError(CkptError):
    """``latest --require`` found no complete checkpoint. Exit code 3."""

    exit_code = 3


class ConflictError(CkptError):
    """A refusal to overwrite something that exists (a tag pointing elsewhere)."""


class DistributedError(CkptError):
    """A push from many ranks failed: every rank raises this same error, naming the rank
    that failed and why. It carries the exit code of that rank's own error (an
    ``InputError`` on one rank is exit 2 on all of them)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.exit_code))


def unrendered(exc: BaseException) -> str:
    """The message of ``exc`` with its parameter references kept, for an error passed on in
    another one (a rank's failure, in every rank's DistributedError): the door that shows
    the outer error spells them."""
    return Exception.__str__(exc) if isinstance(exc, CkptError) else str(exc)


def one_line(text: object, limit: int = 300) -> str:
    """Text from elsewhere (a server's message, an exception) as one line of at most
    ``limit`` characters, its whitespace runs made single spaces.

    >>> one_line("500\\n  upstream   timed out")
    '500 upstream timed out'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quoted(value: object, limit: int = 80) -> str:
    """Untrusted text (a name the Hub sent) for a message: quoted, ASCII-only, control
    characters escaped, never longer than ``limit``, so it can neither break the line nor
    pass for something else.

    >>> quoted("checkpoint-9\\n::warning::x")
    "'checkpoint-9\\\\n::warning::x'"
    """
    text = ascii(str(value))
    return text if len(text) <= limit else text[: limit - 2] + "…'"
