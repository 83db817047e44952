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
