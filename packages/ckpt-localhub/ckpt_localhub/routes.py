"""The routes: which function answers which method and path, for each listener.

Patterns are regexes over the percent-encoded path; their named groups reach the
handler unquoted, in ``call.params``. The first route that matches wins, so the
catch-alls for ids without a namespace (``gpt2``-style, which this Hub never holds)
come last: they answer ``RepoNotFound`` as the Hub does, so ``repo_exists`` and
``file_exists`` say False instead of raising.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from . import (
    api_bucket_files,
    api_buckets,
    api_cas,
    api_commit,
    api_git,
    api_oauth,
    api_repos,
    api_storage,
    api_xet,
    transfer,
)
from .context import Call
from .httpmessages import Response
from .names import RepoNotFound

Handler = Callable[[Call], Response]

_REPO = r"(?P<ns>[^/]+)/(?P<name>[^/]+)"
_API = r"/api/(?P<types>models|datasets|spaces)/" + _REPO
_FILES = r"(?:/(?P<types>datasets|spaces))?/" + _REPO
_REST = r"(?P<{}>.+)"
_BUCKET = r"/api/buckets/" + _REPO


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    pattern: re.Pattern[str]
    handler: Handler


def route(methods: str, pattern: str, handler: Handler) -> Route:
    return Route(frozenset(methods.split("|")), re.compile(pattern), handler)


class RouteTable:
    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes

    def match(self, method: str, path: str) -> tuple[Handler, dict[str, str]] | None:
        for r in self.routes:
            if method in r.methods and (m := r.pattern.fullmatch(path)):
                return r.handler, {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
        return None


def _no_such_repo(call: Call) -> Response:
    raise RepoNotFound("Repository not found")


HUB_ROUTES = RouteTable([
    route("GET", r"/api/whoami-v2", api_repos.whoami),
    route("POST", r"/oauth/token", api_oauth.token),
    route("POST", r"/api/repos/create", api_repos.create_repo),
    route("DELETE", r"/api/repos/delete", api_repos.delete_repo),
    route("POST", r"/api/repos/move", api_repos.move_repo),
    route("POST", r"/api/validate-yaml", api_repos.validate_yaml),
    route("GET", r"/api/settings/repositories", api_repos.user_repos),
    route("GET", r"/api/organizations/(?P<ns>[^/]+)/settings/repositories", api_repos.user_repos),
    route("GET", r"/api/(?P<types>models|datasets|spaces)", api_repos.list_repos),
    # Storage Buckets
    route("GET", r"/api/buckets/(?P<ns>[^/]+)", api_buckets.list_buckets),
    route("POST", _BUCKET, api_buckets.create),
    route("GET", _BUCKET, api_buckets.info),
    route("DELETE", _BUCKET, api_buckets.delete),
    route("PUT", _BUCKET + r"/settings", api_buckets.settings),
    route("GET", _BUCKET + r"/xet-(?P<scope>read|write)-token", api_buckets.xet_token),
    route("GET", _BUCKET + r"/tree(?:/(?P<path>.*))?", api_bucket_files.tree),
    route("POST", _BUCKET + r"/paths-info", api_bucket_files.paths_info),
    route("POST", _BUCKET + r"/batch", api_bucket_files.batch),
    route("GET", _BUCKET + r"/events", api_bucket_files.events),
    route("GET|HEAD", r"/buckets/" + _REPO + r"/resolve/(?P<path>.+)", api_bucket_files.resolve),
    route("GET", _API, api_repos.repo_info),
    route("GET", _API + r"/revision/" + _REST.format("rev"), api_repos.repo_info),
    route("PUT", _API + r"/settings", api_repos.settings),
    route("GET", _API + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", api_git.tree),
    route("POST", _API + r"/paths-info/" + _REST.format("rev"), api_git.paths_info),
    route("GET", _API + r"/refs", api_git.refs),
    route("GET", _API + r"/commits/" + _REST.format("rev"), api_git.commits),
    route("POST", _API + r"/branch/" + _REST.format("branch"), api_git.create_branch),
    route("DELETE", _API + r"/branch/" + _REST.format("branch"), api_git.delete_branch),
    route("POST", _API + r"/tag/" + _REST.format("rev"), api_git.create_tag),
    route("DELETE", _API + r"/tag/" + _REST.format("tag"), api_git.delete_tag),
    route("POST", _API + r"/super-squash/" + _REST.format("branch"), api_git.super_squash),
    route("GET", _API + r"/lfs-files", api_storage.list_lfs_files),
    route("POST", _API + r"/lfs-files/batch", api_storage.delete_lfs_files),
    route("POST", _API + r"/preupload/" + _REST.format("rev"), api_commit.preupload),
    route("POST", _API + r"/commit/" + _REST.format("rev"), api_commit.commit),
    route("GET", _API + r"/xet-(?P<scope>read|write)-token/" + _REST.format("rev"), api_xet.token),
    route("POST", _API + r"/lfs-files/duplicate", api_xet.duplicate),
    route("POST", r"(?:/(?P<types>datasets|spaces))?/(?P<ns>[^/]+)/(?P<name>[^/]+)\.git/info/lfs/objects/batch",
          transfer.lfs_batch),
    route("PUT", r"/localhub-lfs/(?P<oid>[0-9a-f]{64})", transfer.lfs_put),
    route("GET|HEAD", _FILES + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)", transfer.resolve),
    # Ids without a namespace: never stored here, so "not found" whatever follows.
    route("GET|HEAD|POST|PUT|DELETE", r"/api/(?:models|datasets|spaces)/[^/]+(?:/.*)?", _no_such_repo),
    route("GET|HEAD", r"(?:/(?:datasets|spaces))?/[^/]+/resolve/.*", _no_such_repo),
])

CDN_ROUTES = RouteTable([
    route("GET|HEAD", r"/.*", transfer.cdn_get),
])

_HASH = r"(?P<hash>[^/]+)"
# The CAS URL's path prefix after xorbs were freed (XetStore.cas_path): every one answers alike.
_GEN = r"(?:/g[0-9]{1,9})?"

CAS_ROUTES = RouteTable([
    route("GET", _GEN + r"/v1/chunks/(?P<prefix>[^/]+)/" + _HASH, api_cas.dedupe_query),
    route("POST", _GEN + r"/v1/xorbs/default/" + _HASH, api_cas.upload_xorb),
    route("HEAD", _GEN + r"/v1/xorbs/default/" + _HASH, api_cas.head_xorb),
    route("POST", _GEN + r"/v1/shards", api_cas.upload_shard),
    route("GET", _GEN + r"/v1/reconstructions/" + _HASH, api_cas.reconstruction_v1),
    route("GET", _GEN + r"/v2/reconstructions/" + _HASH, api_cas.reconstruction_v2),
    route("HEAD", _GEN + r"/v1/files/" + _HASH, api_cas.head_file),
    route("GET", r"/v1/fetch/xorb/" + _HASH, api_cas.fetch_xorb),
    route("POST", _GEN + r"/v1/telemetry", api_cas.telemetry),
    route("POST", _GEN + r"(?:/v2/shards|/v1/xorb-grants/.*)", api_cas.not_offered),
])
