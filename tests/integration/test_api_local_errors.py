"""An API call that hits a local I/O failure raises a CkptError subclass naming the path,
never a bare OSError: a caller catching ckpt.CkptError handles every failure of ours."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.checkpoint import manifest
from tests.conftest import write_checkpoint


def test_a_push_that_cannot_read_its_files_raises_a_ckpt_error(local_hub, tmp_path: Path, monkeypatch) -> None:
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w" * 100})

    def unreadable(path: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(manifest, "open_regular", unreadable)  # the disk refusing the read, as it would
    with pytest.raises(ckpt.CkptError) as err:
        ckpt.push(src, "o/r", step=1, endpoint=local_hub.url)
    assert not isinstance(err.value, OSError)
    assert "w.bin" in str(err.value) and "Permission denied" in str(err.value)
    assert err.value.exit_code == 1


def test_a_pull_into_a_dir_nobody_may_write_raises_a_ckpt_error(local_hub, tmp_path: Path) -> None:
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w"})
    handle = ckpt.push(src, "o/r", step=1, endpoint=local_hub.url)
    target = Path("/sys/ckpt-action-test")  # refused even to root: a real local failure
    if not Path("/sys").is_dir():
        pytest.skip("needs Linux's /sys")
    with pytest.raises(ckpt.CkptError) as err:
        ckpt.pull(handle, target, endpoint=local_hub.url)
    assert not isinstance(err.value, OSError)
    assert not target.exists()
