"""Reads of one Hub repo, always at a pinned commit SHA.

Every listing and file read names a SHA, never a branch, so what a command looked at
and the SHA it reports are the same snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from .errors import IntegrityError, NotFoundError
from .handle import SHA_RE
from .hubclient import call, make_api, translate
from .manifest import MANIFEST_NAME, Manifest, RemoteFile
from .settings import Settings

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from .commit import CommitOutcome, CommitPlan

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_HISTORY_PAGE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    """A subfolder's files at one SHA, and its manifest if it has one."""

    revision: str
    subfolder: str
    files: dict[str, RemoteFile]
    manifest: Manifest | None
    manifest_bytes: bytes | None = None

    @property
    def exists(self) -> bool:
        return bool(self.files) or self.manifest is not None

    def problems(self) -> list[str]:
        """Why this snapshot is not a complete checkpoint ([] when it is).

        Without a manifest (a folder written by Trainer or ``hf upload``) there is nothing
        to check against, and the folder counts as complete if it holds files.
        """
        if self.manifest is None:
            return [] if self.files else ["the folder is empty"]
        if not self.manifest.complete:
            return ["its push has not finished (manifest marked incomplete)"]
        return self.manifest.mismatches(self.files)


class RemoteRepo:
    """One model repo on one endpoint, read through the real client with retries.

    >>> repo = RemoteRepo(Settings("http://127.0.0.1:8000"), "org/run")  # doctest: +SKIP
    >>> sha = repo.resolve("main")  # doctest: +SKIP
    >>> repo.snapshot(sha, "checkpoint-300").problems()  # doctest: +SKIP
    []
    """

    def __init__(self, settings: Settings, repo: str, api: HfApi | None = None) -> None:
        self.settings = settings
        self.repo = repo
        self.api = api or make_api(settings)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self.settings, what, fn, *args, repo=self.repo, **kwargs)

    def resolve(self, revision: str | None) -> str | None:
        """The 40-hex SHA a branch or tag points at (a SHA passes through).

        None when the repo has no such branch yet (a new, empty repo and ``main``).
        """
        rev = revision or "main"
        if SHA_RE.match(rev):
            return rev
        branches, tags = self.refs()
        for prefix, refs in (("refs/heads/", branches), ("refs/tags/", tags)):  # a branch wins a name clash
            for name, sha in refs.items():
                if rev in (name, prefix + name):
                    return sha
        if revision is None:
            return None
        raise NotFoundError(f"revision {rev!r} is not a branch or tag of {self.repo}: check --revision")

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """Branches and tags, each name to the 40-hex commit it points at."""
        refs = self._call("reading branches and tags", self.api.list_repo_refs, self.repo)
        return ({b.name: str(b.target_commit) for b in refs.branches},
                {t.name: str(t.target_commit) for t in refs.tags})

    def list_tree(self, sha: str, path: str | None = None, *, recursive: bool = False,
                  what: str = "listing the repo") -> list[Any]:
        """Tree entries at sha (all pages); the client retries each page itself."""
        return self._call(what, lambda: list(self.api.list_repo_tree(self.repo, path, revision=sha,  # type: ignore[no-any-return,unused-ignore]
                                                                    recursive=recursive)),
                          client_retries=True)

    def top_level_folders(self, sha: str) -> dict[str, str]:
        """Top-level folders at sha, with their git tree ids."""
        from huggingface_hub import RepoFolder

        return {e.path: e.tree_id for e in self.list_tree(sha) if isinstance(e, RepoFolder)}

    def files(self, sha: str, subfolder: str) -> dict[str, RemoteFile]:
        """Files under subfolder at sha, keyed by path relative to it ({} when absent)."""
        from huggingface_hub import RepoFile
        from huggingface_hub.errors import RemoteEntryNotFoundError

        def listing() -> list[object]:
            try:
                return list(self.api.list_repo_tree(self.repo, subfolder, revision=sha, recursive=True))
            except RemoteEntryNotFoundError:
                return []

        prefix = subfolder.rstrip("/") + "/"
        out: dict[str, RemoteFile] = {}
        for entry in self._call(f"listing {subfolder}/", listing, client_retries=True):
            if not isinstance(entry, RepoFile):
                continue
            if not entry.path.startswith(prefix):
                raise IntegrityError(
                    f"the Hub listed {entry.path!r} under {subfolder}/: refusing a listing that escapes the folder"
                )
            lfs = entry.lfs
            out[entry.path[len(prefix):]] = RemoteFile(
                size=int(entry.size), git_oid=entry.blob_id, lfs_sha256=lfs.sha256 if lfs else None
            )
        return out

    def file_url(self, sha: str, path: str) -> str:
        return f"{self.settings.endpoint}/{self.repo}/resolve/{quote(sha, safe='')}/{quote(path)}"

    def headers(self) -> dict[str, str]:
        """Request headers for file reads: the token, our user agent, and no compression
        (checkpoint bytes are hashed as they arrive)."""
        from huggingface_hub.utils import build_hf_headers

        headers = build_hf_headers(token=self.settings.token or None, library_name="ckpt-action")
        headers["Accept-Encoding"] = "identity"
        return headers

    def read_small_file(self, sha: str, path: str, *, missing_ok: bool = False) -> bytes | None:
        """GET one small file at sha (the manifest), bounded in size; None if absent and missing_ok."""
        from huggingface_hub.utils import get_session, hf_raise_for_status

        url, headers = self.file_url(sha, path), self.headers()

        def get() -> bytes:
            with get_session().stream("GET", url, headers=headers) as response:
                hf_raise_for_status(response)
                chunks, total = [], 0
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > MAX_MANIFEST_BYTES:
                        raise IntegrityError(f"{path} is larger than {MAX_MANIFEST_BYTES} bytes: not a manifest")
                    chunks.append(chunk)
                return b"".join(chunks)

        from huggingface_hub.errors import RemoteEntryNotFoundError

        def get_or_none() -> bytes | None:
            try:
                return get()
            except RemoteEntryNotFoundError:
                if missing_ok:
                    return None
                raise

        return self._call(f"reading {path}", get_or_none)  # type: ignore[no-any-return,unused-ignore]

    def snapshot(self, sha: str, subfolder: str, manifest_bytes: bytes | None = None,
                 files: dict[str, RemoteFile] | None = None) -> Snapshot:
        """The subfolder's files at sha and its manifest; pass what was already read (the
        manifest's bytes, the files from a wider listing) to skip those requests."""
        files = dict(files) if files is not None else self.files(sha, subfolder)
        manifest = None
        if MANIFEST_NAME in files:
            data = manifest_bytes or self.read_small_file(sha, f"{subfolder}/{MANIFEST_NAME}")
            assert data is not None
            manifest = Manifest.from_json(data)
            del files[MANIFEST_NAME]
        return Snapshot(sha, subfolder, files, manifest, data if manifest else None)

    def commit(self, plan: Callable[[str | None], CommitPlan | None], *, what: str, branch: str = "main",
               head: str | None = None, max_commits: int = 1,
               replan_on: Callable[[BaseException], bool] | None = None) -> CommitOutcome:
        """Commit what ``plan(head)`` asks for, each commit pinned to the head it was planned
        at, until it answers None or a final commit lands; after a 412 or an ambiguous
        failure, read the head again and re-plan. The bounds are in :mod:`ckpt_action.commit`.

        ``head``: the branch's head if the caller just read it (else it is read first).
        ``max_commits``: commits answered OK before the write is given up.
        ``replan_on``: a failure the writer can fix by planning again (push: a local file
        changed while it was sent); it counts as a conflict.

        >>> repo.commit(lambda head: None if done(head) else CommitPlan(ops, "Prune"), what="pruning")  # doctest: +SKIP
        CommitOutcome(revision='9ac0…', landed=[CommitPlan(...)], last=CommitPlan(...))
        """
        from .commit import commit_pinned

        return commit_pinned(self, plan, what=what, branch=branch, head=head, max_commits=max_commits,
                             replan_on=replan_on)

    def history(self, sha: str, *, until: str | None, limit: int) -> list[tuple[str, str]]:
        """(commit id, title and message) of the commits reachable from sha, newest first,
        down to ``until`` (included) or ``limit`` commits. Pages are read only as needed,
        each bounded in size, and a next page is followed only on the configured endpoint
        (the request carries the token)."""
        import json

        from huggingface_hub.utils import get_session, hf_raise_for_status

        origin = urlsplit(self.settings.endpoint)[:2]

        def page(url: str) -> tuple[list[Any], str | None]:
            with get_session().stream("GET", url, headers=self.headers()) as response:
                hf_raise_for_status(response)
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_HISTORY_PAGE_BYTES:
                        raise IntegrityError(f"a page of the commit history is larger than {MAX_HISTORY_PAGE_BYTES}"
                                             " bytes: refusing it")
                following = response.links.get("next", {}).get("url")
            items = json.loads(body)
            if not isinstance(items, list):
                raise IntegrityError("the Hub answered a commit history that is not a list")
            if following is not None and urlsplit(following)[:2] != origin:
                following = None  # never send the token to another host
            return items, following

        def read() -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            seen = 0
            url: str | None = f"{self.settings.endpoint}/api/models/{self.repo}/commits/{quote(sha, safe='')}"
            while url is not None and seen < limit:
                items, url = page(url)
                if not items:
                    break
                for item in items[: limit - seen]:
                    seen += 1
                    if isinstance(item, dict):
                        out.append((str(item.get("id")), f"{item.get('title')}\n{item.get('message')}"))
                        if out[-1][0] == until:
                            return out
            return out

        return self._call("reading the commit history", read)  # type: ignore[no-any-return,unused-ignore]

    def folder_id(self, sha: str, path: str) -> str | None:
        """The git tree id of folder ``path`` at sha, in one request whatever the repo's size
        (None when there is no such folder)."""
        from huggingface_hub import RepoFolder

        entries = self._call(f"reading {path}/", self.api.get_paths_info, self.repo, [path], revision=sha)
        return next((str(e.tree_id) for e in entries if isinstance(e, RepoFolder) and e.path == path), None)

    def error(self, exc: BaseException, what: str) -> Exception:
        return translate(exc, what, self.settings, self.repo)
