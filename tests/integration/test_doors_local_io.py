"""One boundary translates errors for both doors: a local I/O failure (a file of the local
dir the disk refuses to read, a pull target nobody may write) leaves the CLI and Python as
the same :class:`~ckpt_action.errors.LocalIOError`, with the same advice, each door naming
the parameter as its users know it (``--local-dir``, ``local_dir=``). Before, the CLI called
the unwrapped function and printed a raw ``PermissionError: [Errno 13] ...``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.checkpoint import manifest
from tests.conftest import clean_env, write_checkpoint


def _cli_error(run) -> str:
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), run.stderr
    return line.removeprefix("error: ")


def test_a_local_dir_the_disk_refuses_reads_the_same_from_both_doors(local_hub, cli, tmp_path: Path,
                                                                      monkeypatch) -> None:
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w" * 100})

    def unreadable(path: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(manifest, "open_regular", unreadable)  # the disk refusing the read, as it would
    with pytest.raises(ckpt.LocalIOError) as err:
        ckpt.push(src, "o/r", step=1, endpoint=local_hub.url)
    python = str(err.value)
    run = cli("push", "--repo", "o/r", "--step", "1", "--local-dir", str(src),
              env=clean_env(tmp_path, HF_ENDPOINT=local_hub.url))
    assert run.code == err.value.exit_code == 1, run.stderr
    said = _cli_error(run)
    assert "PermissionError" not in said and "Errno" not in said, said
    assert said == python.replace("local_dir=", "--local-dir "), (said, python)
    assert "w.bin" in python and "Permission denied" in python and "local_dir=" in python


def test_a_pull_target_nobody_may_write_reads_the_same_from_both_doors(local_hub, cli, tmp_path: Path) -> None:
    if not Path("/sys").is_dir():
        pytest.skip("needs Linux's /sys")
    if os.geteuid() != 0:
        pytest.skip("needs root: a user who may not write /sys is refused by the writability check (exit 2), "
                    "before any local I/O fails")
    src = write_checkpoint(tmp_path / "src", {"w.bin": b"w"})
    ckpt.push(src, "o/r", step=1, endpoint=local_hub.url)
    target = Path("/sys/ckpt-action-test")  # refused even to root: a real local failure
    with pytest.raises(ckpt.LocalIOError) as err:
        ckpt.pull("o/r", target, subfolder="checkpoint-1", endpoint=local_hub.url)
    python = str(err.value)
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(target),
              env=clean_env(tmp_path, HF_ENDPOINT=local_hub.url))
    assert run.code == 1, run.stderr
    said = _cli_error(run)
    assert said == python.replace("local_dir=", "--local-dir "), (said, python)
    assert "local_dir=" in python and not target.exists()
