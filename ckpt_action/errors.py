"""One error hierarchy; each class carries the process exit code the CLI uses.

Messages are one line and say what to change. They never contain a token: the CLI
scrubs the token from anything it prints, and the core never formats one in.
"""

from __future__ import annotations


class CkptError(Exception):
    """Base of every error ckpt-action raises on purpose. Exit code 1."""

    exit_code = 1


class InputError(CkptError):
    """The user's input is wrong; raised before any network call. Exit code 2."""

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


def quoted(value: object, limit: int = 80) -> str:
    """Untrusted text (a name the Hub sent) for a message: quoted, ASCII-only, control
    characters escaped, never longer than ``limit``, so it can neither break the line nor
    pass for something else.

    >>> quoted("checkpoint-9\\n::warning::x")
    "'checkpoint-9\\\\n::warning::x'"
    """
    text = ascii(str(value))
    return text if len(text) <= limit else text[: limit - 2] + "…'"
