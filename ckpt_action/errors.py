"""One error hierarchy; each class carries the process exit code the CLI uses.

A message names the parameters it is about with :func:`param` (``param("tag")``), never as
one door spells them: the door that raised renders each as its users know it
(:meth:`CkptError.render`): ``--tag`` on the command line, ``tag=`` in Python (``str()``
of the error), ``input 'tag'`` in the GitHub Action.

Messages are one line and say what to change. They never contain a token: the core
never formats one in, and an error made from what a server or the client library said
(which may echo the ``Authorization`` header) is scrubbed of the token where it is made,
by the call that holds it (``secrets=``), so the API's exceptions are as clean as the
CLI's lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal

Door = Literal["api", "cli", "action"]
# A parameter reference inside a message: control characters, which no quoted value
# (repr, quoted()) can contain, so a name the Hub or the user sent cannot pass for one.
_START, _END, _ON = "\x02", "\x03", "\x04"
_REF_RE = re.compile("\x02([a-z_]+)(\x04)?\x03( (?=['\"]))?")


def param(name: str) -> str:
    """A reference to the parameter ``name`` (its Python spelling, ``local_dir``) for a message."""
    return f"{_START}{name}{_END}"


def param_on(name: str) -> str:
    """A reference to turning the boolean parameter ``name`` on, for a message that says how
    to: ``--require``, ``require: true`` in the action, ``require=True`` in Python.

    >>> [render(f"pass {param_on('require')}", door) for door in ("cli", "action", "api")]
    ['pass --require', 'pass require: true', 'pass require=True']
    """
    return f"{_START}{name}{_ON}{_END}"


def spell_on(name: str, door: Door) -> str:
    """How the door spells turning a boolean parameter on."""
    if door == "cli":
        return "--" + name.replace("_", "-")
    if door == "action":
        return f"{name.replace('_', '-')}: true"
    return f"{name}=True"


ACTION_INPUT_NAMES = {"metric": "metrics"}
"""Parameters whose action input is named otherwise than the option: the ``metrics`` input
holds the lines that become ``--metric`` options."""


def spell(name: str, door: Door) -> str:
    """How the door spells a parameter: ``--local-dir``, ``local_dir=``, ``input 'local-dir'``."""
    if door == "cli":
        return "--" + name.replace("_", "-")
    if door == "action":
        return f"input '{ACTION_INPUT_NAMES.get(name, name).replace('_', '-')}'"
    return f"{name}="


def render(message: str, door: Door) -> str:
    """``message`` with its parameter references spelled for ``door``; in Python a value
    right after the name joins it (``tag='bad tag'``)."""
    def one(m: re.Match[str]) -> str:
        if m.group(2):
            return spell_on(m.group(1), door)
        spelled = spell(m.group(1), door)
        if m.group(3) and door != "api":
            spelled += " "
        return spelled

    return _REF_RE.sub(one, message)


MAX_CHAIN = 20
"""Exceptions of a chain (cause and context) scrubbed: more is a loop, or not worth walking."""


def secret_forms(*secrets: str | None) -> tuple[str, ...]:
    """Every form a secret may take in a message: as given and stripped, and each inside
    ``repr``/``ascii``/JSON quoting (``b'Bearer hf_...\\n'`` shows the newline as two
    characters). Longest first, so a form is never half-replaced by one inside it.

    >>> secret_forms("hf_abc\\n")
    ('hf_abc\\\\n', 'hf_abc\\n', 'hf_abc')
    """
    forms: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str):
            continue
        for value in {secret, secret.strip()}:
            forms |= {value, repr(value)[1:-1], ascii(value)[1:-1], json.dumps(value)[1:-1],
                      repr(value.encode("utf-8", "backslashreplace"))[2:-1]}
    # Shorter than this is no token, and replacing it would mangle ordinary words.
    return tuple(sorted((f for f in forms if len(f) >= 4), key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of every secret replaced by ``***``."""
    for form in secret_forms(*secrets):
        text = text.replace(form, "***")
    return text


def _scrub_args(exc: BaseException, secrets: tuple[str, ...]) -> None:
    if any(isinstance(a, str) and a != scrub(a, secrets) for a in exc.args):
        exc.args = tuple(scrub(a, secrets) if isinstance(a, str) else a for a in exc.args)


def scrub_chain(exc: BaseException, secrets: Iterable[str]) -> BaseException:
    """Scrub ``exc`` and the exceptions it was raised from (its cause and context), in place:
    a caller printing the whole traceback sees no more of the token than its message."""
    given = tuple(s for s in secrets if s)
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < MAX_CHAIN and given:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        _scrub_args(current, given)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return exc


class CkptError(Exception):
    """Base of every error ckpt-action raises on purpose. Exit code 1.

    ``param`` names the parameter the error is about, when there is one (``"tag"``).
    ``secrets`` (the token, as given): removed from the message in every form.
    """

    exit_code = 1

    def __init__(self, *args: object, param: str | None = None, secrets: Iterable[str | None] = ()) -> None:
        super().__init__(*args)
        self.param = param
        scrub_chain(self, [s for s in secrets if s])

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


class LandedError(CkptError):
    """A push failed after a commit of its own had landed: the message names that commit
    (``revision``) and what went wrong after it, never "nothing was sent". Exit code 1."""

    def __init__(self, *args: object, revision: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.revision = revision


class UnreadableManifest(IntegrityError):
    """One folder's ``ckpt-manifest.json`` cannot be used (not JSON, unknown format, bad
    fields, too big). Listing commands skip that folder; reading it is refused."""


class LocalIOError(CkptError):
    """A file operation on this machine failed (permissions, a full disk, an I/O error):
    the message names the path and the failure. Exit code 1."""


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
