"""``python -m ckpt_action``: the same CLI as the ``ckpt-action`` console script."""

from ckpt_action.cli.app import console

if __name__ == "__main__":
    console()
