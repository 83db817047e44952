"""A digest one look at a pull target made is taken by the next look only while the file's
stat still holds: a file edited in between is hashed again and found edited."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ckpt_action.disk import target as localdir

DATA = b"w" * 4096


@pytest.fixture
def pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dir holding one file under a vouched record, its mtime since changed (a restore from a cache)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "w.bin").write_bytes(DATA)
    rec = localdir.RecordedFile(len(DATA), hashlib.sha256(DATA).hexdigest(), None, 1, (dest / "w.bin").stat().st_ino)
    localdir.write_record(dest, localdir.PullRecord("o/r", "checkpoint-1", "a" * 40, False, {"w.bin": rec}))
    return dest


def test_a_file_whose_stat_changed_is_hashed_once_and_its_digest_passed_down(pulled: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = localdir.check_target(str(pulled), force=False)
    assert set(first.hashed) == {"w.bin"} and not first.edited
    reads = []
    real = localdir._hashed
    monkeypatch.setattr(localdir, "_hashed", lambda *a: reads.append(a) or real(*a))
    again = localdir.check_target(str(pulled), force=False, looked=first)
    assert reads == [] and again.hashed == first.hashed


def test_a_file_edited_after_the_first_look_is_hashed_again_and_found_edited(pulled: Path) -> None:
    first = localdir.check_target(str(pulled), force=False)
    (pulled / "new").write_bytes(b"x" * len(DATA))
    os.replace(pulled / "new", pulled / "w.bin")
    os.utime(pulled / "w.bin", ns=(0, first.hashed["w.bin"].mtime_ns))  # even with size and mtime as they were
    again = localdir.check_target(str(pulled), force=True, looked=first)
    assert again.edited == ["w.bin"] and "w.bin" not in again.hashed
