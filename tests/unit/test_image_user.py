"""In the image (uid 10001), a dir the caller owns is not writable: the message says to pass --user."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ckpt_action.ci.outputs import check_writable
from ckpt_action.disk.access import IMAGE_UID
from ckpt_action.disk.target import pull_target
from ckpt_action.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
HINT = '--user "$(id -u):$(id -g)"'


def test_the_uid_is_the_images() -> None:
    user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert user and int(user.group(1)) == IMAGE_UID


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as a root-owned bind mount looks to the image's user (the tests may run as root)."""
    mount = tmp_path / "data"
    mount.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == mount and mode & os.W_OK
                        else real(p, mode, **kw))
    return mount


def test_as_the_images_user_the_not_writable_messages_say_to_pass_user(read_only, monkeypatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: IMAGE_UID)
    with pytest.raises(InputError, match=re.escape(HINT)):
        check_writable(read_only / "ckpt.env", "--dotenv")
    with pytest.raises(InputError, match=re.escape(HINT)):
        pull_target(str(read_only / "resume"), force=False)
    with pytest.raises(InputError, match=re.escape(HINT)):
        pull_target(str(read_only), force=False)


def test_as_another_user_no_container_advice(read_only, monkeypatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: IMAGE_UID + 1)
    with pytest.raises(InputError, match="not writable") as err:
        check_writable(read_only / "ckpt.env", "--dotenv")
    assert "--user" not in str(err.value)
