"""``ckpt-action watch``: push every complete checkpoint a trainer writes, from outside it.

:mod:`.markers` says when one framework's checkpoint is complete (what each framework
writes last), :mod:`.scanner` follows a dir's checkpoints from first file to complete,
:mod:`.uploader` pushes in a child process at a lower CPU and I/O priority, and
:mod:`.watcher` is the loop (the :class:`~ckpt_action.watch.watcher.Watcher` API, the
training command as a child, signals, the grace period and the commit quota). It goes
through the public API only (``push``, ``prune``), as the integrations do.
"""
