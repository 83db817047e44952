"""ckpt-action: move training checkpoints between CI jobs and a Hugging Face Hub repo.

Every checkpoint handed out is pinned to an immutable commit SHA. The package holds the
core (no Click here); ``entrypoint.py`` is the thin CLI over it.
"""

__version__ = "0.1.0"
