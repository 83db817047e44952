"""``python -m ckpt_localhub``: the ``local-hub`` command (see :mod:`.command`)."""

from .command import local_hub

if __name__ == "__main__":
    local_hub(prog_name="python -m ckpt_localhub")
