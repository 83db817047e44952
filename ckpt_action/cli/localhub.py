"""The local Hub, which the demo and ``local-hub`` run, from its own distribution.

The server is not a dependency of ckpt-action (a training script or the image has no use for
it): ``ckpt-action-localhub``, in ``packages/ckpt-localhub`` of this repository, installed from PyPI
by the extra ``ckpt-action[demo]``. Without it
installed, those two commands say in one line what to install (exit 2, nothing started).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ckpt_action.errors import InputError

PACKAGE = "ckpt_localhub"
# The PyPI extra first (the release publishes both distributions at one version), then a checkout's copy.
INSTALL = ('pip install "ckpt-action[demo]" (the package ckpt-action-localhub; in a checkout of ckpt-action: '
           "pip install ./packages/ckpt-localhub)")


def import_local_hub(command: str, module: str = PACKAGE) -> ModuleType:
    """``module`` of the local Hub's package, or an :class:`InputError` saying what to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != PACKAGE:
            raise  # the package is there but one of its dependencies is not: its own message
        raise InputError(f"`ckpt-action {command}` needs the local Hub, a package of its own that is not "
                         f"installed: {INSTALL}") from None
