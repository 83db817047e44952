"""Options several commands share, defined once: each decorator hands the command one
typed object (:class:`HubOptions`, :class:`WandbOptions`, and the client's own option
groups :class:`~ckpt_action.options.Signing`, :class:`~ckpt_action.options.Verification` and
:class:`~ckpt_action.options.Retention`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from ckpt_action.ci.outputs import check_writable
from ckpt_action.cli.render import SECRET_KEY, fail_with
from ckpt_action.client import Client, check_wandb_inputs
from ckpt_action.errors import CkptError, quoted
from ckpt_action.names import COUNT_FORM, MAX_COUNT_DIGITS, NUMBER_FORM, count_text, number_text
from ckpt_action.options import Retention, Signing, Verification
from ckpt_action.settings import AUTH_CHOICES, MAX_RETRIES, saved_token

F = TypeVar("F", bound=Callable[..., Any])


class CountType(click.types.IntParamType):
    """A whole number in ASCII digits only (Click's ``int`` takes ``٣`` as 3, and fails on
    ``²`` or 5,000 digits only as Python's ``int`` does); a usage error (exit 2) otherwise.
    ``signed``: a ``-`` and a few more digits pass, for the client to say why they are refused
    (a step is never negative, nor past the largest step)."""

    def __init__(self, signed: bool = False) -> None:
        self.signed = signed

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        given = count_text(value, 40 if self.signed else MAX_COUNT_DIGITS, self.signed) \
            if isinstance(value, str) else None
        if given is None:
            self.fail(f"{quoted(value, 40)} is not {COUNT_FORM}", param, ctx)
        return given


class NumberType(click.types.FloatParamType):
    """A number in ASCII digits with at most one ``.`` (no ``٣``, ``nan``, ``inf``, ``1e400``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float | int) and not isinstance(value, bool):
            return float(value)
        given = number_text(value) if isinstance(value, str) else None
        if given is None:
            self.fail(f"{quoted(value, 40)} is not {NUMBER_FORM}", param, ctx)
        return given


COUNT = CountType()
STEP = CountType(signed=True)
NUMBER = NumberType()


@dataclass(frozen=True)
class HubOptions:
    """Where the Hub is, how hard to try, and where outputs go: every Hub command takes these."""

    endpoint: str | None
    token: str | None = field(repr=False)
    as_json: bool
    dotenv: str | None
    timeout: float | None
    retries: int | None
    auth: str | None = None

    def client(self) -> Client:
        """The client for where the Hub is, how to authenticate and how hard to try: one per
        command, so what it reads after its main call (the step summary's table) reuses its
        keyless token instead of exchanging another."""
        return self._client

    @functools.cached_property
    def _client(self) -> Client:
        return Client(self.endpoint, self.token or None, timeout=self.timeout, retries=self.retries, auth=self.auth)


@dataclass(frozen=True)
class WandbOptions:
    """Where to log the W&B pointer artifact; ``project`` None means not at all."""

    project: str | None
    entity: str | None
    run_id: str | None
    artifact_name: str | None
    fatal: bool
    registry: str | None = None


def _options(fn: Callable[..., Any], options: list[Callable[[F], F]]) -> Callable[..., Any]:
    for option in reversed(options):
        fn = option(fn)
    return fn


def hub_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--endpoint, --token, --auth, --json, --dotenv, --timeout, --retries, handed over as ``hub``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, endpoint: str | None, token: str | None, auth: str, as_json: bool, dotenv: str | None,
                timeout: float | None, retries: int | None, **kwargs: Any) -> Any:
        # also a token saved by `hf auth login`, which the API sends when none is given; kept in
        # this command's context for the scrubbing of what it prints (render.scrub)
        secret = token or os.environ.get("HF_TOKEN") or saved_token(os.environ) or None
        click.get_current_context().meta[SECRET_KEY] = secret
        if dotenv:
            try:
                check_writable(dotenv, "dotenv")
            except CkptError as exc:
                fail_with(exc)
        return fn(*args, hub=HubOptions(endpoint, token, as_json, dotenv, timeout, retries, auth), **kwargs)

    return _options(wrapper, [
        click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else the Hub)."),
        click.option("--token", envvar="HF_TOKEN", help="Hub token (default: HF_TOKEN). Never printed."),
        click.option("--auth", type=click.Choice(AUTH_CHOICES, case_sensitive=False), default="auto",
                     show_default=True, help="auto: a token given, else keyless when the job can mint an OIDC id "
                     "token (ACTIONS_ID_TOKEN_REQUEST_URL, or HF_OIDC_ID_TOKEN), else none; token; oidc: a "
                     "short-lived token exchanged per repo (HF_OIDC_RESOURCE scopes it to one)."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout (on an error too: error,"
                     " exit_code, option)."),
        click.option("--dotenv", type=click.Path(dir_okay=False), help="Also write outputs as a dotenv file "
                     "(GitLab CI artifacts:reports:dotenv)."),
        click.option("--timeout", type=NUMBER, help="Seconds a request may stall (default 60; CKPT_TIMEOUT)."),
        click.option("--retries", type=COUNT,
                     help=f"Retries of transient failures (default 5, at most {MAX_RETRIES}; CKPT_RETRIES)."),
    ])


def wandb_options(*, registry: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The W&B pointer options, handed over as ``wandb``; promote adds --wandb-registry."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, wandb_project: str | None, wandb_entity: str | None, wandb_run_id: str | None,
                    wandb_artifact_name: str | None, wandb_fatal: bool, wandb_registry: str | None = None,
                    **kwargs: Any) -> Any:
            opts = WandbOptions(wandb_project or None, wandb_entity or None, wandb_run_id or None,
                                wandb_artifact_name or None, wandb_fatal, wandb_registry or None)
            if opts.project:  # checked before the command sends anything, not after its commit
                try:
                    check_wandb_inputs(project=opts.project, entity=opts.entity, run_id=opts.run_id,
                                           artifact_name=opts.artifact_name, registry=opts.registry,
                                           prefix="wandb_")
                except CkptError as exc:
                    fail_with(exc)
            return fn(*args, wandb=opts, **kwargs)

        options = [
            click.option("--wandb-project", envvar="WANDB_PROJECT", help="Log a W&B pointer artifact to this project."),
            click.option("--wandb-entity", envvar="WANDB_ENTITY", help="W&B entity (team or user)."),
            click.option("--wandb-run-id", envvar="WANDB_RUN_ID", help="Attach the pointer to this (training) run."),
            click.option("--wandb-artifact-name", help="Artifact name (default: derived from repo and folder)."),
        ]
        if registry:
            options.append(click.option("--wandb-registry",
                                        help="Link the pointer into this W&B registry collection (online only)."))
        options.append(click.option("--wandb-fatal", is_flag=True, help="Fail the command when W&B logging fails."))
        return _options(wrapper, options)

    return decorate


def _trust_config() -> Callable[[F], F]:
    return click.option("--sigstore-trust-config", type=click.Path(dir_okay=False),
                        help="A Sigstore ClientTrustConfig JSON for keyless signing/verification (default: "
                             "Sigstore's public instance).")


def signing_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The signer options, handed over as ``signing`` (a :class:`~ckpt_action.options.Signing`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, signing_key: str | None, signing_certificate: str | None, signing_chain: str | None,
                sign_keyless: bool, sigstore_trust_config: str | None, **kwargs: Any) -> Any:
        signing = Signing.from_keywords(signing_key=signing_key, signing_certificate=signing_certificate,
                                        signing_chain=signing_chain, sign_keyless=sign_keyless,
                                        sigstore_trust_config=sigstore_trust_config)
        return fn(*args, signing=signing, **kwargs)

    return _options(wrapper, [
        click.option("--signing-key", type=click.Path(dir_okay=False), help="Sign model.sig with this "
                     "elliptic-curve private key PEM (password only from CKPT_SIGNING_KEY_PASSWORD)."),
        click.option("--signing-certificate", type=click.Path(dir_okay=False),
                     help="The signing key's certificate PEM (with --signing-chain)."),
        click.option("--signing-chain", type=click.Path(dir_okay=False),
                     help="The CA certificates PEM from the signing certificate up to the root."),
        click.option("--sign-keyless", is_flag=True, help="Sign keyless with Sigstore and the ambient GitHub "
                     "Actions OIDC token (the workflow needs `permissions: id-token: write`)."),
        _trust_config(),
    ])


def verify_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The signature checks, handed over as ``verify`` (a :class:`~ckpt_action.options.Verification`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, verify_key: str | None, verify_certificate_chain: str | None,
                verify_identity: str | None, verify_issuer: str | None, sigstore_trust_config: str | None,
                verify_min_step: int | None, verify_require_provenance: bool, **kwargs: Any) -> Any:
        verify = Verification.from_keywords(
            verify_key=verify_key, verify_certificate_chain=verify_certificate_chain, verify_identity=verify_identity,
            verify_issuer=verify_issuer, sigstore_trust_config=sigstore_trust_config,
            verify_min_step=verify_min_step, verify_require_provenance=verify_require_provenance)
        return fn(*args, verify=verify, **kwargs)

    return _options(wrapper, [
        click.option("--verify-key", type=click.Path(dir_okay=False),
                     help="Require model.sig signed by this public key PEM."),
        click.option("--verify-certificate-chain", type=click.Path(dir_okay=False),
                     help="Require model.sig signed by a code-signing certificate this CA PEM vouches for, valid now"
                          " (a certificate signature carries no trusted time stamp)."),
        click.option("--verify-identity", help="Require a keyless signature by this identity (GitHub Actions: "
                     "https://github.com/ORG/REPO/.github/workflows/X.yml@REF, or https://github.com/ORG/REPO "
                     "for any workflow of the repo)."),
        click.option("--verify-issuer", help="The identity's OIDC issuer (GitHub Actions: "
                     "https://token.actions.githubusercontent.com)."),
        _trust_config(),
        click.option("--verify-min-step", type=STEP, help="Refuse a checkpoint whose signed step is below this: a "
                     "signature does not prove a checkpoint is the newest, so an older signed one put back verifies."),
        click.option("--verify-require-provenance", is_flag=True, help="Refuse a checkpoint without a signed "
                     "ckpt-provenance.json (one signed by another tool verifies wherever it is copied)."),
    ])


def repo_option(help: str = "Hub model repo, OWNER/NAME, or a bucket, hf://buckets/OWNER/NAME[/PREFIX].",
                required: bool = True) -> Callable[[F], F]:
    return click.option("--repo", required=required, help=help)


def metric_option(fn: F) -> F:
    """push's --metric NAME=VALUE (repeatable), handed over as ``metrics`` (a tuple of texts)."""
    return click.option("--metric", "metrics", multiple=True, metavar="NAME=VALUE",
                        help="Record a metric of the checkpoint in its manifest (repeatable): a name without "
                             "whitespace, '=' or ':' and a finite number, e.g. eval_loss=0.31.")(fn)


def best_option(fn: F) -> F:
    """latest's and promote's --best METRIC:min|max, handed over as ``best``."""
    return click.option("--best", metavar="METRIC:min|max",
                        help="Choose the complete checkpoint-N with the lowest (min) or highest (max) value of this "
                             "metric in its manifest; one without it is never chosen.")(fn)


def retention_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """prune's --keep-last, --keep-every and --keep-best (what each keeps is kept), handed
    over as ``retention`` (a :class:`~ckpt_action.options.Retention`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, keep_last: int | None, keep_every: int | None, keep_best: str | None,
                **kwargs: Any) -> Any:
        retention = Retention.from_keywords(keep_last=keep_last, keep_every=keep_every, keep_best=keep_best)
        return fn(*args, retention=retention, **kwargs)

    return _options(wrapper, [
        click.option("--keep-last", type=COUNT, help="Keep the newest K checkpoint-N."),
        click.option("--keep-every", type=COUNT, metavar="N", help="Keep every checkpoint-N whose step is a "
                     "multiple of N."),
        click.option("--keep-best", metavar="METRIC:min|max[:K]", help="Keep the K (default 1) best checkpoint-N "
                     "by this metric in their manifests; alone, also every one without it. A metric no checkpoint "
                     "has exits 2 before anything is deleted."),
    ])


def card_option(fn: F) -> F:
    """push's, prune's and promote's --card, handed over as ``card``."""
    return click.option("--card", is_flag=True, help="Also keep the table of the repo's checkpoints (step, pinned "
                        "SHA, metrics, complete, signed, tags) in its README.md between markers, in the same "
                        "commit; the rest of the card is left as it is.")(fn)
