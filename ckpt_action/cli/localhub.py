"""The local Hub, which the demo and ``local-hub`` run, from its own distribution.

The server is not a dependency of ckpt-action (a training script or the image has no use for
it): ``ckpt-action-localhub``, in ``packages/ckpt-localhub`` of this repository, installed from PyPI
by the extra ``ckpt-action[demo]``. Without it
installed, those two commands say in one line what to install (exit 2, nothing started).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ckpt_action.errors import InputError

PACKAGE = "ckpt_localhub"
# The PyPI extra first (the release publishes both distributions at one version), then a checkout's copy.
INSTALL = ('pip install "ckpt-action[demo]" (the package ckpt-action-localhub; in a checkout of ckpt-action: '
           "pip install ./packages/ckpt-localhub)")
DEPENDENCIES = ('pip install "ckpt-action[demo]" brings them (in a checkout of ckpt-action: '
                "pip install --require-hashes -r packages/ckpt-localhub/requirements.lock)")


def installed() -> bool:
    """Whether the local Hub's package is on the path: found, not imported (nor its dependencies)."""
    return importlib.util.find_spec(PACKAGE) is not None


def not_installed(command: str) -> InputError:
    """The one line ``command`` says when the local Hub's package is not installed."""
    return InputError(f"`ckpt-action {command}` needs the local Hub, a package of its own that is not "
                      f"installed: {INSTALL}")


def import_local_hub(command: str, module: str = PACKAGE) -> ModuleType:
    """``module`` of the local Hub's package, or an :class:`InputError` saying what to install:
    the package, or the dependency of it that is missing (installed with ``--no-deps``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None:
            raise
        top = exc.name.split(".")[0]
        if top != PACKAGE:
            raise InputError(f"`ckpt-action {command}` needs the local Hub's dependency {top!r}, which is "
                             f"not installed: {DEPENDENCIES}") from None
        raise not_installed(command) from None
