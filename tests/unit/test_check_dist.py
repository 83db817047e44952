"""scripts/check_dist.py, the release's check that a wheel holds exactly its package, refuses a
wheel with one stray or one missing file (the real build is checked in tests/e2e/test_packaging.py)."""

from __future__ import annotations

import importlib.util
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_dist", ROOT / "scripts" / "check_dist.py")
assert _spec is not None and _spec.loader is not None
check_dist = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_dist)


def _wheel(folder: Path, files: set[str]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "ckpt_action-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name in sorted(files | {"ckpt_action-0.1.0.dist-info/METADATA"}):
            zf.writestr(name, "x")
    with tarfile.open(folder / "ckpt_action-0.1.0.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("ckpt_action-0.1.0/pyproject.toml")
        tf.addfile(info)
    return path


def test_exactly_the_package_passes(tmp_path):
    _wheel(tmp_path / "dist", check_dist.package_files(ROOT, "ckpt_action"))
    assert check_dist.check(tmp_path / "dist") == []


def test_a_stray_test_bench_or_local_hub_file_fails(tmp_path):
    for stray in ("tests/test_x.py", "bench/run.py", "ckpt_localhub/server.py", "ckpt_action/localhub/data.bin"):
        folder = tmp_path / stray.replace("/", "_")
        _wheel(folder, check_dist.package_files(ROOT, "ckpt_action") | {stray})
        errors = check_dist.check(folder)
        assert len(errors) == 1 and stray in errors[0], errors


def test_a_missing_module_fails(tmp_path):
    files = check_dist.package_files(ROOT, "ckpt_action")
    _wheel(tmp_path / "dist", files - {"ckpt_action/api.py"})
    assert check_dist.check(tmp_path / "dist") == ["ckpt_action-0.1.0-py3-none-any.whl: lacks ckpt_action/api.py"]


def test_an_sdist_with_the_tests_fails(tmp_path):
    _wheel(tmp_path / "dist", check_dist.package_files(ROOT, "ckpt_action"))
    with tarfile.open(tmp_path / "dist" / "ckpt_action-0.1.0.tar.gz", "w:gz") as tf:
        tf.addfile(tarfile.TarInfo("ckpt_action-0.1.0/tests/test_x.py"))
    assert check_dist.check(tmp_path / "dist") == ["ckpt_action-0.1.0.tar.gz: holds tests/test_x.py"]
