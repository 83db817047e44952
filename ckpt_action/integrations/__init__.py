"""Integrations with training frameworks; each needs its own optional extra.

Nothing here is imported by the CLI, the action or the image:
``ckpt_action.integrations.transformers`` needs ``pip install 'ckpt-action[transformers]'``.
"""
