"""Reads of one Hub repo, always at a pinned commit SHA.

Every listing and file read names a SHA, never a branch, so what a command looked at
and the SHA it reports are the same snapshot. Every read is bounded (see
:func:`~ckpt_action.stores.hub.transport.get_bounded` and :mod:`~ckpt_action.stores.hub.listing`) and what it
returns is checked: commit ids are 40 hex, folder names follow the rules of
``--subfolder`` (others are skipped with a warning), manifests parse strictly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ckpt_action import names
from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, RemoteFile
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.errors import InputError, IntegrityError, LimitError, NotFoundError, UnreadableManifest, param, quoted
from ckpt_action.handle import SHA_RE, commit_id
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.listing import Listing, on_endpoint, parse_json, read_tree, tree_url
from ckpt_action.stores.hub.transport import bind_shared_client, call, client_headers, get_bounded, make_api, translate

if TYPE_CHECKING:
    from huggingface_hub import HfApi


MAX_HISTORY_PAGE_BYTES = 8 * 1024 * 1024
log = logging.getLogger(__name__)


def folder_problem(name: str) -> str | None:
    """Why a folder name the Hub listed is not one ckpt-action uses (None when it is):
    the rules of ``--subfolder``, so every name the commands print or take is one a user
    could have typed."""
    if not name.isprintable():
        return "has control or non-printing characters"
    try:
        if names.subfolder(name) == name:
            return None
    except InputError:
        pass
    return "is not a usable folder name (letters, digits and ._+=@- segments separated by '/')"


def skip_name(name: str, why: str) -> None:
    """Report a name the Hub listed that is not used: a warning, the name quoted."""
    log.warning("skipped %s listed by the Hub: it %s", quoted(name), why)


class RemoteRepo:
    """One model repo on one endpoint, read through the real client with retries.

    >>> repo = RemoteRepo(Settings(hub.url), "org/run")
    >>> head = repo.resolve("main")
    >>> repo.snapshot(head, "checkpoint-300").problems()
    []
    """

    def __init__(self, settings: Settings, repo: str, api: HfApi | None = None) -> None:
        self.settings = settings
        self.repo = repo
        self._api = api
        if api is None:
            bind_shared_client()  # as make_api would: reads go through the shared client too

    @property
    def api(self) -> HfApi:
        """The client's API for this endpoint, made on first use: reads (refs, listings,
        manifests, file bodies) do without it, so a pull or latest never imports it."""
        if self._api is None:
            self._api = make_api(self.settings, self.repo)
        return self._api

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
        raise NotFoundError(f"revision {rev!r} is not a branch or tag of {self.repo}: check {param('revision')}")

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """Branches and tags, each name to the 40-hex commit it points at.

        A ref whose target is not 40 hex fails the command (the Hub is broken or hostile);
        one whose name could not be typed as ``--revision`` is skipped with a warning.
        """
        what = "reading branches and tags"

        def too_big() -> LimitError:
            return LimitError(f"{what}: the Hub's answer is larger than {self.settings.max_listing_bytes} bytes"
                              " (CKPT_MAX_LISTING_BYTES)")

        response = self._call(what, get_bounded, self.settings, f"{self.settings.endpoint}/api/models/{self.repo}/refs",
                              self.headers(), limit=self.settings.max_listing_bytes, too_big=too_big)
        data = parse_json(response.content, what)
        out: tuple[dict[str, str], dict[str, str]] = ({}, {})
        for (kind, one), refs in zip((("branches", "branch"), ("tags", "tag")), out, strict=True):
            items = data.get(kind) if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise IntegrityError(f"{what}: the Hub answered no list of {kind}")
            for item in items:
                name = item.get("name") if isinstance(item, dict) else None
                if not isinstance(name, str):
                    raise IntegrityError(f"{what}: the Hub answered a {one} without a name")
                target = commit_id(item.get("targetCommit"), f"{one} {quoted(name, 60)}")
                try:
                    usable = name.isprintable() and names.revision(name) == name
                except InputError:
                    usable = False
                if not usable:
                    skip_name(name, f"is not a usable {one} name")
                    continue
                refs[name] = target
        return out

    def list_tree(self, sha: str, path: str | None = None, *, recursive: bool = False,
                  what: str = "listing the repo") -> Listing:
        """Tree entries at sha (every page, within the listing bounds), checked; an
        absent folder lists as empty."""
        listing = read_tree(self.settings, self.repo, tree_url(self.settings.endpoint, self.repo, sha, path),
                            self.headers(), recursive=recursive, what=what, missing_ok=path is not None)
        return listing if listing is not None else Listing()

    def top_level_folders(self, sha: str) -> dict[str, str]:
        """Top-level folders at sha, with their git tree ids; unusable names are skipped
        with a warning."""
        listing = self.list_tree(sha)
        out: dict[str, str] = {}
        for entry, unusable in listing.unusable:
            if entry.folder:
                skip_name(entry.path, unusable)
        for entry in listing.entries:
            if entry.folder:
                why = "is not at the top level" if "/" in entry.path else folder_problem(entry.path)
                if why is None:
                    out[entry.path] = entry.oid
                else:
                    skip_name(entry.path, why)
        return out

    def files(self, sha: str, subfolder: str) -> dict[str, RemoteFile]:
        """Files under subfolder at sha, keyed by path relative to it ({} when absent).

        A path that cannot be used, or one outside the folder, refuses the whole listing:
        dropping it would make a checkpoint look like something it is not.
        """
        listing = self.list_tree(sha, subfolder, recursive=True, what=f"listing {subfolder}/")
        if listing.unusable:
            entry, why = listing.unusable[0]
            raise IntegrityError(f"the Hub listed {quoted(entry.path)} under {subfolder}/, which {why}:"
                                 " refusing the listing")
        prefix = subfolder.rstrip("/") + "/"
        out: dict[str, RemoteFile] = {}
        for entry in listing.entries:
            if entry.folder:
                continue
            if not entry.path.startswith(prefix):
                raise IntegrityError(f"the Hub listed {quoted(entry.path)} under {subfolder}/:"
                                     " refusing a listing that escapes the folder")
            out[entry.path[len(prefix):]] = RemoteFile(size=entry.size, git_oid=entry.oid, lfs_sha256=entry.lfs_sha256)
        return out

    def file_url(self, sha: str, path: str) -> str:
        return f"{self.settings.endpoint}/{self.repo}/resolve/{quote(sha, safe='')}/{quote(path)}"

    def headers(self) -> dict[str, str]:
        """Request headers for every read: the token, our user agent, and no compression
        (checkpoint bytes are hashed as they arrive; the byte caps on refs, listings and
        manifests count what the wire carries)."""
        if self._api is not None or self.settings.auth == "oidc":  # the client's own (make_api or the caller's)
            headers = self.api._build_hf_headers()
        else:
            headers = client_headers(self.settings.endpoint, self.settings.token or None)
        headers["Accept-Encoding"] = "identity"
        return headers

    def read_small_file(self, sha: str, path: str, *, missing_ok: bool = False) -> bytes | None:
        """GET one small file at sha (a manifest), bounded in time and in size
        (``max_manifest_bytes``: past it, the manifest is unreadable); None if absent and missing_ok."""
        read = small_file_reader(self.settings, self.file_url(sha, path), self.headers(), path, missing_ok=missing_ok)
        return self._call(f"reading {path}", read)  # type: ignore[no-any-return,unused-ignore]

    def read_at_head(self, branch: str, path: str, *, missing_ok: bool = False) -> tuple[bytes | None, str]:
        """GET one small file at the head of ``branch`` (as :meth:`read_small_file`), with the
        commit it was read at: the one the Hub names in its answer, or, when it names none
        that is 40 hex, the branch resolved and the file read again at that commit."""
        commits: list[str | None] = []
        read = small_file_reader(self.settings, self.file_url(branch, path), self.headers(), path,
                                 missing_ok=missing_ok, commits=commits)
        data: bytes | None = self._call(f"reading {path}", read)
        said = commits[-1] if commits else None
        if isinstance(said, str) and SHA_RE.match(said):
            return data, said
        sha = self.resolve(branch)
        if sha is None:
            raise NotFoundError(f"reading {path}: {self.repo} has no branch {quoted(branch)}")
        return self.read_small_file(sha, path, missing_ok=missing_ok), sha

    def snapshot(self, sha: str, subfolder: str, manifest_bytes: bytes | None = None,
                 files: dict[str, RemoteFile] | None = None) -> Snapshot:
        """The subfolder's files at sha and its manifest; pass what was already read (the
        manifest's bytes, the files from a wider listing) to skip those requests."""
        files = dict(files) if files is not None else self.files(sha, subfolder)
        manifest = None
        if MANIFEST_NAME in files:
            data = manifest_bytes or self.read_small_file(sha, f"{subfolder}/{MANIFEST_NAME}")
            assert data is not None
            try:
                manifest = Manifest.from_json(data)
            except UnreadableManifest as exc:
                raise UnreadableManifest(f"{subfolder}/: {exc}") from exc
            del files[MANIFEST_NAME]
        return Snapshot(sha, subfolder, files, manifest, data if manifest else None)

    def history(self, sha: str, *, until: str | None, limit: int) -> list[tuple[str, str]]:
        """(commit id, title and message) of the commits reachable from sha, newest first,
        down to ``until`` (included) or ``limit`` commits. Pages are read only as needed,
        each bounded in size, and a next page is followed only on the configured endpoint
        (the request carries the token)."""
        what = "reading the commit history"

        def too_big() -> IntegrityError:
            return IntegrityError(f"a page of the commit history is larger than {MAX_HISTORY_PAGE_BYTES} bytes:"
                                  " refusing it")

        def page(url: str) -> tuple[list[Any], str | None]:
            response = get_bounded(self.settings, url, self.headers(), limit=MAX_HISTORY_PAGE_BYTES, too_big=too_big)
            items = parse_json(response.content, what)
            if not isinstance(items, list):
                raise IntegrityError("the Hub answered a commit history that is not a list")
            following = response.links.get("next", {}).get("url")
            if following is not None and not on_endpoint(following, self.settings.endpoint):
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

        return self._call(what, read)  # type: ignore[no-any-return,unused-ignore]

    def folder_id(self, sha: str, path: str) -> str | None:
        """The git tree id of folder ``path`` at sha, in one request whatever the repo's size
        (None when there is no such folder)."""
        from huggingface_hub import RepoFolder

        entries = self._call(f"reading {path}/", self.api.get_paths_info, self.repo, [path], revision=sha)
        return next((str(e.tree_id) for e in entries if isinstance(e, RepoFolder) and e.path == path), None)

    def existing(self, sha: str, paths: list[str]) -> set[str]:
        """Which of ``paths`` are files at sha, in one request (the Hub ignores the others)."""
        from huggingface_hub import RepoFile

        if not paths:
            return set()
        entries = self._call(f"reading {len(paths)} path(s)", self.api.get_paths_info, self.repo, paths, revision=sha)
        wanted = set(paths)
        return {str(e.path) for e in entries if isinstance(e, RepoFile) and e.path in wanted}

    def error(self, exc: BaseException, what: str) -> Exception:
        return translate(exc, what, self.settings, self.repo)


def small_file_reader(settings: Settings, url: str, headers: dict[str, str], path: str, *,
                      missing_ok: bool, commits: list[str | None] | None = None) -> Callable[[], bytes | None]:
    """One GET of a small file (a manifest), bounded by ``max_manifest_bytes`` (past it, the
    manifest is unreadable); None if absent and ``missing_ok``. Every store's reads of a
    manifest go through it, each under its own retries. With ``commits``, the commit the Hub
    says it answered from (``X-Repo-Commit``, also on a 404 for a path) is appended to it, as
    the Hub sent it: the caller checks it."""
    from huggingface_hub.errors import RemoteEntryNotFoundError

    limit = settings.max_manifest_bytes

    def too_big() -> UnreadableManifest:
        return UnreadableManifest(f"{path} is larger than {limit} bytes (CKPT_MAX_MANIFEST_BYTES):"
                                  " not a manifest, or raise the bound")

    def get_or_none() -> bytes | None:
        try:
            response = get_bounded(settings, url, headers, limit=limit, too_big=too_big)
        except RemoteEntryNotFoundError as exc:
            if not missing_ok:
                raise
            if commits is not None:
                commits.append(exc.response.headers.get("X-Repo-Commit") if exc.response is not None else None)
            return None
        if commits is not None:
            commits.append(response.headers.get("X-Repo-Commit"))
        return response.content

    return get_or_none
