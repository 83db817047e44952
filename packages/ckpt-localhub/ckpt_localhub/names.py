"""The names the local Hub's storage takes and the errors it answers with.

Which repo types, repo ids (``namespace/name``), paths in a repo and branch or tag names are
accepted (whole-string patterns); a repo's metadata, with its id as spelled when it was
created; and the refusals of the store, each a :class:`~.objects.StorageError` carrying the
HTTP status (and Hub error code) an endpoint answers with. Apart from the store so that an
endpoint can check a name, or catch a refusal, without the store.

Example:

    >>> check_repo_id("me/ckpts")
    ('me', 'ckpts')
    >>> check_path("../escape")
    Traceback (most recent call last):
    ...
    ckpt_localhub.names.InvalidPath: Invalid path in repo: '../escape'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .objects import StorageError

REPO_TYPES = ("model", "dataset", "space")
GATED = (False, "auto", "manual")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REF_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}")
STALE_PARENT = "The branch was updated since you opened this page. Please refresh and try again."


class RepoNotFound(StorageError):
    status = 404
    code = "RepoNotFound"


class RevisionNotFound(StorageError):
    status = 404
    code = "RevisionNotFound"


class EntryNotFound(StorageError):
    status = 404
    code = "EntryNotFound"


class Conflict(StorageError):
    status = 409


class RepoExists(Conflict):
    """Any spelling of the repo exists already; ``meta`` is the repo that does."""

    def __init__(self, message: str, meta: RepoMeta) -> None:
        super().__init__(message)
        self.meta = meta


class RepoMoved(RepoNotFound):
    """The id names a repo that was moved (renamed): ``to`` is its id now. The Hub answers such
    ids with a same-host redirect; where an answer cannot redirect, it is RepoNotFound."""

    def __init__(self, to: str) -> None:
        super().__init__("Repository not found")
        self.to = to


class Forbidden(StorageError):
    status = 403


class StaleParent(StorageError):
    status = 412


class InvalidPath(StorageError):
    status = 422


def check_repo_id(repo_id: str) -> tuple[str, str]:
    """``namespace/name`` split in two, or StorageError; ids without a namespace are refused."""
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_NAME_RE.fullmatch(p) and ".." not in p for p in parts):
        raise StorageError(f"Invalid repo id {repo_id!r}: expected namespace/name")
    return parts[0], parts[1]


def check_path(path: str) -> str:
    """Refuse paths that could leave the repo or confuse git (absolute, ``..``, ``.git`` or empty parts).

    As on the Hub, ``\\`` is an ordinary character (``folder/..\\..\\file`` is one file);
    only a path that starts with ``..\\`` stays refused, as the Hub refuses ``..\\ddd``
    (huggingface_hub's test_create_file_with_relative_path): read on Windows it leaves the repo.
    """
    parts = path.split("/")
    if (
        not path
        or path.startswith(("/", "..\\"))
        or "\0" in path
        or any(p in ("", ".", "..", ".git") for p in parts)
    ):
        raise InvalidPath(f"Invalid path in repo: {path!r}")
    return path


def check_ref_name(name: str, kind: str) -> str:
    if not _REF_RE.fullmatch(name) or ".." in name or name.endswith(("/", ".lock")) or "//" in name \
            or name.startswith("refs/"):
        raise StorageError(f"Invalid reference for a {kind}: {name}")
    return name


@dataclass(frozen=True)
class RepoMeta:
    repo_type: str
    repo_id: str  # the spelling the repo was created (or moved) with
    private: bool
    created_at: str
    gated: bool | str = False

