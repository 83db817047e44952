"""Choosing a checkpoint: latest with its warnings, ``require``, and which folder a pull
takes, with what latest read of it passed down (the manifest is read once, and the
signature checked once, when latest chose the folder the pull takes): given as ``found``,
or carried by the very handle latest answered (:func:`carry`), so that
``ckpt.pull(ckpt.latest(repo), dest)`` reads it once too."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from ckpt_action.errors import NoCheckpointError, param_on
from ckpt_action.handle import CheckpointHandle

if TYPE_CHECKING:
    from ckpt_action.checkpoint.metrics import Objective
    from ckpt_action.checkpoint.verifying import Verifier
    from ckpt_action.ops.discover import Chosen, LatestResult
    from ckpt_action.options import Verification
    from ckpt_action.stores.base import Store

Warn = Callable[[str], None]


def no_checkpoint(repo: str, purpose: str = "", found: LatestResult | None = None,
                  why: str | None = None) -> NoCheckpointError:
    """The error for a repo holding no complete checkpoint (exit 3); ``found``, what latest
    answered, rides along for a door that reports it before failing; ``why``: the repo is
    missing, said in the same line."""
    exc = NoCheckpointError(f"no complete checkpoint-N in {repo}{purpose}" + (f": {why}" if why else ""))
    exc.found = found  # type: ignore[attr-defined]
    return exc


def choose_latest(remote: Store, revision: str | None, warn: Warn, verifier: Verifier | None = None, *,
                  require: bool = False, best: Objective | None = None, purpose: str = "") -> LatestResult:
    """The highest complete checkpoint (with ``best``: the best by that metric), its
    warnings said (a missing repo, each folder passed over); ``require``: none raises
    :func:`no_checkpoint` (``purpose`` ends its first clause), the one place it is checked.
    With ``require`` a missing repo is no warning (its advice is to require) but the
    error's reason."""
    from ckpt_action.ops.discover import latest, latest_best

    res = latest(remote, revision, verifier) if best is None else latest_best(remote, best, revision, verifier)
    token = bool(remote.settings.token)
    missing = None if require else res.missing_warning(_name(remote), token=token, require=param_on("require"))
    if missing:
        warn(missing)
    for name, why in res.skipped:
        warn(f"skipped {name}: {why}")
    if require and res.handle is None:
        raise no_checkpoint(_name(remote), purpose, found=res, why=res.missing_reason(_name(remote), token=token))
    return res


def for_pull(remote: Store, subfolder: str | None, revision: str | None, sha: str | None, warn: Warn,
             verifier: Verifier | None, *, source: object = None, found: LatestResult | None = None,
             checked: bool = False) -> tuple[str, str | None, Chosen | None]:
    """(subfolder, sha, chosen) for a pull: the folder named, else latest's (none raises
    :func:`no_checkpoint`). ``found``, a latest result whose handle is ``source``: what it read
    of that folder goes down to the pull, not its signature check (the pull's ``verifier``
    is checked by the pull) unless ``checked``: ``verifier`` is the one latest checked it
    with. A latest made here with the pull's verifier passes both."""
    chosen = found.chosen if found is not None and found.handle == source else None
    if chosen is not None and not (checked and chosen.verifier is verifier):
        chosen = dataclasses.replace(chosen, signature=None, verifier=None)
    if subfolder is not None:
        return subfolder, sha, chosen
    res = choose_latest(remote, revision, warn, verifier, require=True, purpose=" to pull")
    assert res.handle is not None
    handle: CheckpointHandle = res.handle
    return handle.subfolder, handle.revision, res.chosen


# --------------------------------------------------------------------------- what latest learned, carried by its handle

_CARRIED = "_ckpt_latest"


class _Carried:
    """What latest read of the folder a handle names, riding on that handle object to the
    pull that takes it (``ckpt.pull(ckpt.latest(repo), dest)``): the folder at a pinned SHA
    never changes, so its manifest is not read twice. Never pickled or copied: a handle
    sent elsewhere (another process, a deep copy) reads the folder itself."""

    __slots__ = ("found", "verification")

    def __init__(self, found: LatestResult | None = None, verification: Verification | None = None) -> None:
        self.found = found
        self.verification = verification

    def __reduce__(self) -> tuple[type[_Carried], tuple[()]]:
        return (_Carried, ())


def _wanted(verification: Verification | None) -> Verification | None:
    return verification if verification is not None and verification.wanted else None


def carry(res: LatestResult, verification: Verification | None = None) -> LatestResult:
    """``res``, its handle carrying it (and the check it was made with, ``verification``)."""
    if res.handle is not None and res.chosen is not None:
        carried = _Carried(res, _wanted(verification))
        object.__setattr__(res.handle, _CARRIED, carried)  # frozen: set past its own __setattr__
    return res


def carried(source: object) -> LatestResult | None:
    carried = getattr(source, _CARRIED, None) if isinstance(source, CheckpointHandle) else None
    return carried.found if isinstance(carried, _Carried) else None


def carried_check(source: object, verification: Verification | None) -> Verifier | None:
    """The verifier latest checked the handle's folder with, when the pull asks for the very
    same check (so its result stands); else None."""
    carried = getattr(source, _CARRIED, None) if isinstance(source, CheckpointHandle) else None
    if not isinstance(carried, _Carried) or carried.found is None or carried.found.chosen is None:
        return None
    wanted = _wanted(verification)
    return carried.found.chosen.verifier if wanted is not None and carried.verification == wanted else None


def _name(store: Store) -> str:
    """The repo id or bucket URI the messages name."""
    return store.name
