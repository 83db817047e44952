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


@pytest.mark.parametrize("raised", [ValueError, RuntimeError, KeyError], ids=["value", "runtime", "key"])
def test_any_error_while_a_pull_stages_its_files_is_a_ckpt_error_and_the_target_is_untouched(
        raised: type[Exception], local_hub, tmp_path: Path, monkeypatch) -> None:
    """Not only an OSError: whatever a library raises while the files are staged leaves the
    API as a CkptError, the earlier pull's files as they were and no staging dir behind."""
    from ckpt_action.stores.repo import RepoStore  # where a pull downloads each file

    first = {"a.bin": b"a" * 100, "b.bin": b"b" * 100}
    handle1 = ckpt.push(write_checkpoint(tmp_path / "one", first), "o/r", step=1, endpoint=local_hub.url)
    handle2 = ckpt.push(write_checkpoint(tmp_path / "two", {"a.bin": b"A" * 100, "b.bin": b"B" * 100}), "o/r",
                        step=2, endpoint=local_hub.url)
    target = tmp_path / "target"
    ckpt.pull(handle1, target, endpoint=local_hub.url)
    before = sorted(p.name for p in tmp_path.iterdir())
    real = RepoStore.download

    def failing(remote, revision, path, dest, *args, **kwargs):
        if path.endswith("b.bin"):
            Path(dest).write_bytes(b"half")  # a half-written download, as a failure mid-body leaves
            raise raised("the client library failed in an unexpected way")
        return real(remote, revision, path, dest, *args, **kwargs)

    monkeypatch.setattr(RepoStore, "download", failing)
    with pytest.raises(ckpt.CkptError) as err:
        ckpt.pull(handle2, target, endpoint=local_hub.url, retries=0)
    assert not isinstance(err.value, raised) and "unexpected way" in str(err.value), repr(err.value)
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.suffix == ".bin"} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert [p.name for p in target.iterdir() if p.name.startswith(".") and p.name != ".ckpt-pull.json"] == []
