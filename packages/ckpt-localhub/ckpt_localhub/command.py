"""The local Hub's one command line: ``local-hub`` (also ``python -m ckpt_localhub``).

Example:

    $ python -m ckpt_localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
    http://127.0.0.1:41233

The first stdout line is the base URL. The token may also come from ``LOCAL_HUB_TOKEN``
so it stays out of process listings. Exit status: 2 for an option out of range (a port past
65535; nothing is created), an unusable faults file or a data dir another server holds, 1
when a port cannot be bound.
"""

from __future__ import annotations

import click

from .faults import FaultFileError
from .httpserver import MAX_CONNECTIONS
from .objects import StorageError
from .oidc import TrustedPublisher
from .server import run_server

# Checked by Click before anything runs: a port out of range is exit 2 naming its flag, and the
# data dir is not created.
PORT = click.IntRange(0, 65535)


@click.command("local-hub")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Where repos are stored.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default); beyond loopback, also pass --token.")
@click.option("--port", default=0, show_default=True, type=PORT, help="Port; 0 picks a free one.")
@click.option("--port-file", type=click.Path(dir_okay=False), help="Write the port here once listening.")
@click.option("--access-log", type=click.Path(dir_okay=False), help="One JSON line per request.")
@click.option("--faults", type=click.Path(dir_okay=False), help="JSON fault rules, re-read when changed.")
@click.option("--token", envvar="LOCAL_HUB_TOKEN", help="Require this bearer token (default: open). "
              "Also read from LOCAL_HUB_TOKEN.")
@click.option("--cdn-port", default=0, show_default=True, type=PORT,
              help="Port of the second listener that LFS downloads are redirected to; 0 picks a free one.")
@click.option("--lfs-direct", is_flag=True,
              help="Serve LFS downloads from the Hub's own port instead of redirecting them to the CDN listener.")
@click.option("--no-xet", is_flag=True,
              help="Plain LFS only: no Xet token routes, no CAS listener, no Xet headers on downloads.")
@click.option("--cas-port", default=0, show_default=True, type=PORT,
              help="Port of the Xet CAS listener; 0 picks a free one.")
@click.option("--max-connections", default=MAX_CONNECTIONS, show_default=True, type=click.IntRange(1, 10000),
              help="Connections served at once on each listener; more are answered 503 with Retry-After.")
@click.option("--oidc-issuer", metavar="URL",
              help="Trust id tokens of this OIDC issuer (keys found by discovery at URL/.well-known/"
                   "openid-configuration): POST /oauth/token exchanges them for repo-scoped tokens.")
@click.option("--trusted-publisher", "trusted_publishers", multiple=True,
              metavar="OWNER/NAME=GITHUB_ORG/GITHUB_REPO[:write|read]",
              help="Jobs of GITHUB_ORG/GITHUB_REPO (the id token's repository claim) may get a token for the repo"
                   " OWNER/NAME (datasets/ or spaces/ before it for those), write by default. Repeatable.")
@click.option("--oidc-token-ttl", default=3600, show_default=True, type=click.IntRange(1, 86400),
              help="Seconds an exchanged token lives.")
def local_hub(data_dir: str, host: str, port: int, port_file: str | None, access_log: str | None,
              faults: str | None, token: str | None, cdn_port: int, lfs_direct: bool, no_xet: bool,
              cas_port: int, max_connections: int, oidc_issuer: str | None, trusted_publishers: tuple[str, ...],
              oidc_token_ttl: int) -> None:
    """Run the Hub-compatible local server (prints its URL as the first line once listening)."""
    try:
        publishers = [TrustedPublisher.parse(p) for p in trusted_publishers]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trusted-publisher") from None
    if publishers and not oidc_issuer:
        raise click.BadParameter("needs --oidc-issuer (the issuer whose id tokens it trusts)",
                                 param_hint="--trusted-publisher")
    if oidc_issuer and not oidc_issuer.startswith(("https://", "http://")):
        raise click.BadParameter(f"{oidc_issuer!r} is not an http(s) URL", param_hint="--oidc-issuer")
    try:
        run_server(data_dir, host=host, port=port, port_file=port_file, access_log=access_log, faults=faults,
                   token=token or None, lfs_redirect=not lfs_direct, cdn_port=cdn_port, xet=not no_xet,
                   cas_port=cas_port, max_connections=max_connections, oidc_issuer=oidc_issuer or None,
                   trusted_publishers=publishers, oidc_token_ttl=oidc_token_ttl)
    except (FaultFileError, StorageError) as exc:
        click.echo(f"local-hub: error: {exc}", err=True)
        raise SystemExit(2) from None
    except OSError as exc:
        click.echo(f"local-hub: error: cannot serve on {host}:{port}: {exc.strerror or exc}", err=True)
        raise SystemExit(1) from None
