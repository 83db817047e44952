"""Xet upload sessions for files bound for a Storage Bucket.

huggingface_hub's bucket batch uploads the files it is handed in a session of its own, with
hf_xet's sha256 off (a bucket names a file by its Xet hash alone), and answers only when
the batch is done. A push needs more of the session: each file's sha256 for its manifest
(``COMPUTE_SHA256`` has hf_xet take it in the read it uploads from; or the store takes it
beside the upload, :class:`~ckpt_action.stores.bucket.BucketStore`), and each file's Xet
hash as soon as hf_xet has read it, while its bytes are still on their way: the push plans
its manifest from them meanwhile and adds the manifest's bytes to the same session, instead
of opening a second one for them (its token, its dedupe query, its xorb and shard: about
0.05 s). The batch then names each file by its Xet hash (:mod:`.bucketbatch`).

What hf_xet answers is checked like any answer: a Xet hash and a sha256 of 64 hex each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckpt_action.errors import IntegrityError, quoted
from ckpt_action.handle import SHA256_RE
from ckpt_action.stores.hub.bucketbatch import Add


@dataclass(frozen=True)
class Read:
    """A file hf_xet has read: its Xet hash, the sha256 and the size of the bytes read."""

    xet: str
    sha256: str | None
    """None when the session was told not to compute it (:meth:`CasUpload.start`)."""
    size: int


class CasUpload:
    """One Xet upload session into ``bucket_id``'s CAS; the Xet token is fetched from
    ``endpoint`` with ``headers`` (the client's, with its token), as huggingface_hub does.
    No progress bar: the caller draws its own line."""

    def __init__(self, endpoint: str, headers: dict[str, str], bucket_id: str) -> None:
        from huggingface_hub.utils._xet import (
            XetTokenType,
            get_xet_session,
            xet_connection_info_refresh_url,
            xet_headers_without_auth,
        )

        refresh = xet_connection_info_refresh_url(token_type=XetTokenType.WRITE, repo_id=bucket_id,
                                                  repo_type="bucket", endpoint=endpoint)
        self._handles: list[tuple[Add, Any, str | None, bool]] = []
        self._commit = get_xet_session().new_upload_commit(
            token_refresh_url=refresh, token_refresh_headers=headers,
            custom_headers=xet_headers_without_auth(headers), progress_callback=None)

    def start(self, adds: list[Add], sha256s: Mapping[str, str | None], *, compute: bool = True) -> None:
        """Start sending ``adds``; ``sha256s``: the digests
        known already, by destination; hf_xet computes the others, unless not ``compute``
        (the caller hashes them itself, later)."""
        from hf_xet import COMPUTE_SHA256, SKIP_SHA256

        for add in adds:
            known = sha256s.get(add.destination)
            # A sha256 known already is not handed to hf_xet: the file may have changed since
            # it was hashed (the push finds that after), and the CAS would record it.
            sha = SKIP_SHA256 if known or not compute else COMPUTE_SHA256
            if isinstance(add.source, bytes):
                handle = self._commit.start_upload_bytes(add.source, sha256=sha)
            else:
                handle = self._commit.start_upload_file(str(add.source), sha256=sha)
            self._handles.append((add, handle, known, sha is COMPUTE_SHA256))

    def read(self) -> dict[str, Read]:
        """Each started file once hf_xet has read it (its bytes may still be on their way),
        by destination."""
        out = {}
        for add, handle, known, computed in self._handles:
            info = handle.result().xet_info
            sha = info.sha256 if computed else known
            for what, value in (("Xet hash", info.hash), ("sha256", sha)):
                if (value is not None or computed) and not (isinstance(value, str) and SHA256_RE.match(value)):
                    raise IntegrityError(f"the Xet upload of {add.destination} answered a malformed {what}"
                                         f" {quoted(value, 80)}: nothing was written")
            out[add.destination] = Read(info.hash, sha, int(info.file_size))
        return out

    def finish(self) -> dict[str, Read]:
        """Wait until every byte and the shard naming them are stored; then each add carries
        its Xet hash and size, for the batch that names it."""
        from huggingface_hub.utils._xet import abort_xet_session

        try:
            self._commit.wait_to_finish()
        except KeyboardInterrupt:
            abort_xet_session()
            raise
        out = self.read()
        for add, *_ in self._handles:
            add.xet_hash, add.size = out[add.destination].xet, out[add.destination].size
        return out

    def abort(self) -> None:
        """Give the session up (an add keeps no Xet hash: a retry sends it again)."""
        with contextlib.suppress(Exception):  # giving up on a session that failed already
            self._commit.abort()


def send_to_cas(endpoint: str, headers: dict[str, str], bucket_id: str, adds: list[Add],
                sha256s: Mapping[str, str | None]) -> dict[str, Read]:
    """Upload the bytes of ``adds`` in one session (:class:`CasUpload`) and set each one's
    Xet hash and size; what was read of each, by destination."""
    upload = CasUpload(endpoint, headers, bucket_id)
    try:
        upload.start(adds, sha256s)
        return upload.finish()
    except BaseException:
        upload.abort()
        raise
