"""Integrations with training frameworks; each needs its own optional extra.

Nothing here is imported by the CLI, the action or the image:
``ckpt_action.integrations.transformers`` needs the ``transformers`` extra (``pip install ".[transformers]"``
in a checkout; ckpt-action is not on PyPI).
"""
