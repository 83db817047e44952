"""What a "not writable" message adds inside the container image.

The image runs as uid 10001 (Dockerfile ``USER``), so a bind mount owned by the caller (or
by root) is not writable there: ``docker run -v "$PWD/out:/data" ...`` fails on the first
write. The fix is on the docker command line, so the message says it.
"""

from __future__ import annotations

import os

IMAGE_UID = 10001
"""The image's user (Dockerfile ``USER 10001:10001``; a test holds the two together)."""


def not_writable_hint() -> str:
    """Advice to append to a "not writable" message: ``--user`` when running as the image's user.

    >>> not_writable_hint() if os.getuid() != IMAGE_UID else ""
    ''
    """
    if getattr(os, "getuid", lambda: -1)() != IMAGE_UID:
        return ""
    return (f' (this runs as the image\'s user, uid {IMAGE_UID}: pass --user "$(id -u):$(id -g)" to docker run'
            " so it writes as the owner of the mounted dir)")
