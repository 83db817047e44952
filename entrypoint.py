#!/usr/bin/env python3
"""The ckpt-action command line, run from a checkout: ``python entrypoint.py push ...``.

The CLI itself lives in :mod:`ckpt_action.cli.app` (installed as the ``ckpt-action`` console
script); this file is only the door the action's native runtime and a checkout use.
"""

from ckpt_action.cli.app import console

if __name__ == "__main__":
    console()
