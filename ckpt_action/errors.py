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
    """Downloaded or remote content does not match what it claims to be."""


class NoCheckpointError(CkptError):
    """``latest --require`` found no complete checkpoint. Exit code 3."""

    exit_code = 3


class ConflictError(CkptError):
    """A refusal to overwrite something that exists (a tag pointing elsewhere)."""
