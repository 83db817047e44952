"""The suite's warnings: a known one from a dependency is filtered (pyproject.toml says why),
so a new warning stands out instead of drowning among hundreds of copies."""

from __future__ import annotations

import warnings

import httpx2


def test_the_clients_lfs_upload_deprecation_is_filtered_and_others_still_show() -> None:
    # huggingface_hub's LFS upload passes a file object as data= (lfs.py); httpx2 warns on every upload.
    with warnings.catch_warnings(record=True) as caught:
        httpx2.Request("PUT", "http://127.0.0.1:1/upload", data=b"bytes")  # type: ignore[arg-type]
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)], [str(w.message) for w in caught]
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn("a new deprecation", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a new deprecation"]


def test_a_librarys_warning_is_printed_named_for_its_package(caplog) -> None:
    """On the CLI a Python warning becomes one warning line named for the package that warned
    ("huggingface_hub: ..."), not "py.warnings: UserWarning: ..."."""
    import logging

    from ckpt_action.cli.render import _show_warning

    where = "/venv/lib/python3.11/site-packages/huggingface_hub/repocard.py"
    with caplog.at_level(logging.WARNING):
        _show_warning(UserWarning("empty or missing yaml metadata in repo card"), UserWarning, where, 1)
        _show_warning(FutureWarning("going away"), FutureWarning, where, 2)
        _show_warning(UserWarning("ours"), UserWarning, "/src/train.py", 3)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("huggingface_hub", "empty or missing yaml metadata in repo card"),
        ("huggingface_hub", "FutureWarning: going away"),
        ("python", "ours")]
