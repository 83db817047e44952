"""ckpt-action command line: parse, validate, call the core, emit outputs.

The same CLI runs from the GitHub Action, in the container image
(``docker run IMAGE push ...``), as the ``ckpt-action`` console script and by hand
(``python entrypoint.py`` in a checkout). It only handles arguments and output; the
work is done by the core modules it calls, imported inside each command so a command
loads only what it needs. Options shared by several commands are defined once, as
decorators that hand the command one typed object (:class:`HubOptions`,
:class:`WandbOptions`).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar
from urllib.parse import urlsplit

import click

from ckpt_action import names
from ckpt_action.ci.escaping import escape
from ckpt_action.ci.outputs import (
    append_summary,
    check_writable,
    summary_markdown,
    write_dotenv,
    write_github_output,
    write_json,
)
from ckpt_action.errors import CkptError, InputError, NoCheckpointError, NotFoundError
from ckpt_action.settings import MAX_RETRIES, Settings
from ckpt_action.version import __version__

if TYPE_CHECKING:
    from ckpt_action.handle import CheckpointHandle

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_NONE = 0, 1, 2, 3
F = TypeVar("F", bound=Callable[..., Any])


class _Secret:
    """The token, so every printed line can be scrubbed of it."""

    value: str | None = os.environ.get("HF_TOKEN") or None


def scrub(text: str) -> str:
    token = _Secret.value
    return text.replace(token, "***") if token and len(token) >= 4 else text


class _AnnotationHandler(logging.Handler):
    """Log records (ours and the client's) as warning lines: ``::warning::`` in Actions,
    scrubbed of the token and escaped like everything else printed."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(_annotate("warning", f"{record.name}: {record.getMessage()}"), err=True)
        except Exception:  # noqa: BLE001 - logging must never take the command down
            self.handleError(record)


def _in_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _annotate(kind: str, message: str) -> str:
    message = scrub(" ".join(str(message).split()))
    if _in_actions():
        return f"::{kind}::{escape(message, 'annotation')}"
    return f"{kind}: {escape(message)}"


def warn(message: str) -> None:
    click.echo(_annotate("warning", message), err=True)


def fail(message: str, code: int) -> NoReturn:
    click.echo(_annotate("error", message), err=True)
    sys.exit(code)


def echo(text: str, *, err: bool = False) -> None:
    """Print one line built from values that may come from the Hub or the user."""
    click.echo(escape(scrub(text)), err=err)


def _setup_logging() -> None:
    root = logging.getLogger()
    root.handlers[:] = [_AnnotationHandler()]
    root.setLevel(logging.WARNING)


def _route_client_logs() -> None:
    """huggingface_hub adds its own stderr handler when imported, which would print each
    warning twice and skip the token scrubbing: send its records through ours only."""
    import huggingface_hub  # noqa: F401 - its import is what installs the handler

    logging.getLogger("huggingface_hub").handlers[:] = []


# --- shared options ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HubOptions:
    """Where the Hub is, how hard to try, and where outputs go: every Hub command takes these."""

    endpoint: str | None
    token: str | None
    as_json: bool
    dotenv: str | None
    timeout: float | None
    retries: int | None

    def settings(self, endpoint: str | None = None) -> Settings:
        """Validated settings, with the client configured for them (before its first import)."""
        _Secret.value = self.token or _Secret.value
        settings = Settings.from_env(endpoint=endpoint or self.endpoint, token=self.token or None,
                                     timeout=self.timeout, retries=self.retries)
        from ckpt_action.hub.transport import prepare

        # The client's own default endpoint (telemetry, helpers that take no endpoint) must
        # be this one, also when it came from --endpoint: it is read at the client's import,
        # which comes next. One command a process, so setting it process-wide is right here
        # (the Python API passes endpoints instead).
        os.environ["HF_ENDPOINT"] = settings.endpoint
        prepare(settings)  # before the client's import, so its import-time switches fit the endpoint
        _route_client_logs()
        return settings


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
    """--endpoint, --token, --json, --dotenv, --timeout, --retries, handed over as ``hub``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, endpoint: str | None, token: str | None, as_json: bool, dotenv: str | None,
                timeout: float | None, retries: int | None, **kwargs: Any) -> Any:
        if dotenv:
            try:
                check_writable(dotenv, "--dotenv")
            except CkptError as exc:
                fail(str(exc), exc.exit_code)
        return fn(*args, hub=HubOptions(endpoint, token, as_json, dotenv, timeout, retries), **kwargs)

    return _options(wrapper, [
        click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else the Hub)."),
        click.option("--token", envvar="HF_TOKEN", help="Hub token (default: HF_TOKEN). Never printed."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
        click.option("--dotenv", type=click.Path(dir_okay=False), help="Also write outputs as a dotenv file "
                     "(GitLab CI artifacts:reports:dotenv)."),
        click.option("--timeout", type=float, help="Seconds a request may stall (default 60; CKPT_TIMEOUT)."),
        click.option("--retries", type=int,
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


def repo_option(help: str = "Hub model repo, OWNER/NAME.", required: bool = True) -> Callable[[F], F]:
    return click.option("--repo", required=required, help=help)


def emit(command: str, result: dict[str, Any], hub: HubOptions, human: Callable[[], None] | None = None) -> None:
    """Write the result everywhere it is wanted: stdout, GITHUB_OUTPUT, job summary, dotenv.

    ``human`` prints the terminal form when it is not a plain ``key: value`` list.
    """
    if os.environ.get("GITHUB_OUTPUT"):
        write_github_output(os.environ["GITHUB_OUTPUT"], result)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(os.environ["GITHUB_STEP_SUMMARY"], summary_markdown(command, result))
    if hub.dotenv:
        write_dotenv(hub.dotenv, result)
    if hub.as_json:
        write_json(sys.stdout, result)
    elif human is not None:
        human()
    else:
        for key, value in result.items():
            if value is not None and not isinstance(value, (list, dict)):
                echo(f"{key}: {value}")


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn our errors into one stderr line and the exit code the error class carries."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except CkptError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except OSError as exc:
            fail(f"{type(exc).__name__}: {exc}", EXIT_FAIL)
        except Exception as exc:
            if os.environ.get("CKPT_DEBUG"):
                raise
            fail(f"unexpected {type(exc).__name__}: {exc} (set CKPT_DEBUG=1 for a traceback)", EXIT_FAIL)

    return wrapper


class _Group(click.Group):
    """The commands, with those defined elsewhere loaded only when named: the local Hub
    owns its command line, and importing it would slow every other command's start."""

    elsewhere: ClassVar[dict[str, tuple[str, str]]] = {"local-hub": ("ckpt_action.localhub.command", "local_hub")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.elsewhere])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.elsewhere:
            import importlib

            module, name = self.elsewhere[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ckpt-action")
def cli() -> None:
    """Move training checkpoints between CI jobs and a Hugging Face Hub repo, pinned to commit SHAs.

    \b
    Exit codes: 0 done; 1 remote or I/O failure; 2 bad input (nothing was sent);
    3 `latest --require` / `pull --latest` found no complete checkpoint.
    """


# --- push ---------------------------------------------------------------------------------------

@cli.command()
@repo_option()
@click.option("--local-dir", required=True, help="The checkpoint directory to push.")
@click.option("--subfolder", help="Folder in the repo (default: checkpoint-STEP).")
@click.option("--step", type=int, help="Training step; alone, it names the subfolder checkpoint-STEP.")
@click.option("--private/--public", default=True, show_default=True,
              help="Visibility of the repo if push creates it (an existing repo is left as it is).")
@click.option("--commit-message", help="Commit title (default: 'Push SUBFOLDER (step N)').")
@click.option("--distributed", is_flag=True, help="Run on every rank of a torchrun job (needs torch): each rank "
              "uploads its own --local-dir, one commit lands; without RANK/WORLD_SIZE a push alone.")
@wandb_options()
@hub_options
@command
def push(repo: str, local_dir: str, subfolder: str | None, step: int | None, private: bool,
         commit_message: str | None, distributed: bool, wandb: WandbOptions, hub: HubOptions) -> None:
    """Push a local checkpoint dir to REPO/SUBFOLDER and report the commit SHA that holds it complete.

    The subfolder ends up exactly equal to the local dir; a manifest is committed last.
    Identical content makes no commit and reports the current SHA.
    """
    repo = names.repo_id(repo)
    subfolder, step = names.push_target(subfolder, step)
    from ckpt_action.disk.source import local_dir_to_push

    # With --distributed each rank checks its own dir inside the push, so that a bad one
    # fails every rank at once.
    path = None if distributed else local_dir_to_push(local_dir)
    if commit_message is not None:
        commit_message = names.commit_message(commit_message)
    settings = hub.settings()
    names.token_for_write(settings.token, settings.endpoint)

    from ckpt_action import api
    from ckpt_action.ci.outputs import push_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.push import push as do_push
    from ckpt_action.progress import quiet_client_bars

    quiet_client_bars()
    res = None
    if distributed:
        with api.joined_process_group(settings.distributed_timeout):
            res = api.push_on_ranks(settings, repo, local_dir, subfolder, step=step, private=private,
                                    commit_message=commit_message)
    if res is None:
        path = path or local_dir_to_push(local_dir)
        res = do_push(RemoteRepo(settings, repo), path, subfolder, step=step, private=private,
                      commit_message=commit_message)
    result = push_outputs(res, path or Path(local_dir))
    if wandb.project:
        result |= _log_wandb(res.handle, wandb)
    emit("push", result, hub)


def _log_wandb(handle: CheckpointHandle, wandb: WandbOptions) -> dict[str, Any]:
    from ckpt_action.wandb import pointer as wandb_pointer

    assert wandb.project is not None
    try:
        pointer = wandb_pointer.log_pointer(handle, project=wandb.project, entity=wandb.entity,
                                            run_id=wandb.run_id, artifact_name=wandb.artifact_name)
        if wandb.registry:
            try:
                ref = f"{pointer.entity}/{pointer.project}/{pointer.artifact_name}:latest"
                wandb_pointer.link_to_registry(ref, wandb.registry, project=pointer.project, entity=pointer.entity)
            except CkptError as exc:
                warn(f"the pointer is logged, but linking it into {wandb.registry} failed: {exc}")
    except CkptError as exc:
        if wandb.fatal:
            raise
        warn(f"the checkpoint is pushed, but W&B logging failed: {exc}")
        return {"wandb_artifact": None}
    return {"wandb_artifact": pointer.artifact_name, "wandb_run_id": pointer.run_id}


# --- latest -------------------------------------------------------------------------------------

@cli.command()
@repo_option()
@click.option("--revision", help="Branch, tag or SHA to look at (default: main).")
@click.option("--require", is_flag=True, help="Exit 3 when there is no complete checkpoint.")
@hub_options
@command
def latest(repo: str, revision: str | None, require: bool, hub: HubOptions) -> None:
    """Find the highest complete checkpoint-N, pinned to the SHA it was read at.

    Nothing found exits 0 with found=false (3 with --require); a failure to tell exits 1.
    """
    repo = names.repo_id(repo)
    revision = names.revision(revision)
    settings = hub.settings()

    from ckpt_action.ci.outputs import latest_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.discover import latest as find_latest

    res = find_latest(RemoteRepo(settings, repo), revision)
    _report_skipped(res, repo)
    emit("latest", latest_outputs(repo, res), hub)
    if res.handle is None and require:
        raise NoCheckpointError(f"no complete checkpoint-N in {repo}")


def _report_skipped(res: Any, repo: str) -> None:
    if res.repo_missing:
        warn(f"{repo} does not exist, or this token cannot see it: no checkpoint")
    for name, why in res.skipped:
        warn(f"skipped {name}: {why}")


# --- pull ---------------------------------------------------------------------------------------

def _origin(url: str) -> str:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = parts.port if parts.port not in (None, default) else None
    return f"{parts.scheme}://{(parts.hostname or '').lower()}" + (f":{port}" if port else "")


def _check_pointer_origin(pointed: CheckpointHandle, configured: str) -> None:
    """The token goes only to the configured endpoint: a pointer naming another host is refused."""
    if _origin(pointed.endpoint) != _origin(configured):
        raise InputError(
            f"the pointer names the Hub at {_origin(pointed.endpoint)}, but the configured endpoint is"
            f" {_origin(configured)}: pass --endpoint {_origin(pointed.endpoint)} explicitly if that host is"
            " really trusted with the token")


@cli.command()
@repo_option("Hub model repo, OWNER/NAME (from the pointer with --pointer).", required=False)
@click.option("--subfolder", help="Folder to pull.")
@click.option("--latest", "use_latest", is_flag=True, help="Pull the highest complete checkpoint-N.")
@click.option("--pointer", type=click.Path(), help="A W&B pointer checkpoint.json (or its dir) to pull.")
@click.option("--from-wandb", help="A W&B artifact ENTITY/PROJECT/NAME:ALIAS holding a pointer (online).")
@click.option("--revision", help="A commit SHA, branch or tag (default: main).")
@click.option("--local-dir", required=True, help="Where the checkpoint's files go: a new or empty dir, or one "
              "holding an earlier pull (updated in place: only what changed is downloaded).")
@click.option("--force", is_flag=True, help="Replace a dir holding an earlier pull even if files were added to "
              "it since. Never replaces other dirs.")
@click.option("--include", multiple=True, metavar="GLOB", help="Pull only files matching this pattern (path "
              "inside the folder; repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files matching this pattern (repeatable).")
@click.option("--cache-dir", envvar="CKPT_CACHE_DIR", help="Keep verified files here by sha256 and fill later "
              "pulls from it (CKPT_CACHE_DIR; size: CKPT_CACHE_MAX_SIZE, default 50G).")
@hub_options
@command
def pull(repo: str | None, subfolder: str | None, use_latest: bool, pointer: str | None, from_wandb: str | None,
         revision: str | None, local_dir: str, force: bool, include: tuple[str, ...], exclude: tuple[str, ...],
         cache_dir: str | None, hub: HubOptions) -> None:
    """Download one checkpoint at a pinned SHA, verify every file, then move it into place.

    Files already in --local-dir from an earlier pull, or in --cache-dir, are not downloaded again.
    """
    sources = [bool(subfolder), use_latest, bool(pointer), bool(from_wandb)]
    if sum(sources) != 1:
        raise InputError("pull needs exactly one of --subfolder, --latest, --pointer or --from-wandb")
    from ckpt_action.disk.target import pull_target

    target = pull_target(local_dir, force=force)
    from ckpt_action.disk.cache import CacheConfig
    from ckpt_action.ops.pull import Selection

    cache = CacheConfig.from_options(cache_dir, target)
    select = Selection.from_options(include, exclude)
    revision = names.revision(revision)
    settings = hub.settings()
    sha = None
    if pointer or from_wandb:
        if revision:
            raise InputError("--revision does not go with a pointer: the pointer pins the SHA")
        from ckpt_action.wandb import pointer as wandb_pointer

        pointed = (wandb_pointer.read_pointer(pointer) if pointer
                   else wandb_pointer.fetch_pointer(str(from_wandb), timeout=settings.timeout))
        _check_pointer_origin(pointed, settings.endpoint)
        if repo and names.repo_id(repo) != pointed.repo:
            raise InputError(f"--repo {repo} disagrees with the pointer's repo {pointed.repo}: drop --repo")
        repo, subfolder, sha = pointed.repo, pointed.subfolder, pointed.revision
    else:
        repo = names.repo_id(repo)
        subfolder = names.subfolder(subfolder) if subfolder else ""

    from ckpt_action.ci.outputs import pull_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.pull import pull as do_pull
    from ckpt_action.progress import quiet_client_bars

    quiet_client_bars()
    remote = RemoteRepo(settings, repo)
    if use_latest:
        from ckpt_action.ops.discover import latest as find_latest

        found = find_latest(remote, revision)
        _report_skipped(found, repo)
        if found.handle is None:
            raise NoCheckpointError(f"no complete checkpoint-N in {repo} to pull")
        subfolder, sha = found.handle.subfolder, found.handle.revision
    assert subfolder is not None
    res = do_pull(remote, subfolder, revision, target, force=force, sha=sha, select=select, cache=cache)
    emit("pull", pull_outputs(res), hub)


# --- promote, list, prune -----------------------------------------------------------------------

@cli.command()
@repo_option("Hub model repo holding the checkpoint, OWNER/NAME.")
@click.option("--subfolder", required=True, help="The checkpoint folder to promote.")
@click.option("--revision", help="SHA, branch or tag the checkpoint is read at (default: main's head).")
@click.option("--to", "to", required=True, help="Target folder, e.g. release.")
@click.option("--to-repo", help="Promote into another repo (bytes stream through, verified).")
@click.option("--tag", help="Tag the resulting commit; an existing tag elsewhere is refused.")
@click.option("--branch", help="Commit the promotion on this branch (created from the source SHA).")
@wandb_options(registry=True)
@hub_options
@command
def promote(repo: str, subfolder: str, revision: str | None, to: str, to_repo: str | None, tag: str | None,
            branch: str | None, wandb: WandbOptions, hub: HubOptions) -> None:
    """Copy a pinned checkpoint to a release folder (and/or branch, tag) in one commit, server-side."""
    repo = names.repo_id(repo)
    subfolder = names.subfolder(subfolder)
    to = names.subfolder(to, flag="--to")
    revision = names.revision(revision)
    tag = names.revision(tag, flag="--tag") if tag else None
    branch = names.revision(branch, flag="--branch") if branch else None
    to_repo = names.repo_id(to_repo) if to_repo else None
    if to_repo and branch:
        raise InputError("--branch does not go with --to-repo: promote into the other repo's main")
    settings = hub.settings()
    names.token_for_write(settings.token, settings.endpoint)

    from ckpt_action.ci.outputs import promote_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.release import promote as do_promote
    from ckpt_action.progress import quiet_client_bars

    quiet_client_bars()
    remote = RemoteRepo(settings, repo)
    target = RemoteRepo(settings, to_repo, api=remote.api) if to_repo else None
    res = do_promote(remote, subfolder, revision, to, tag=tag, branch=branch, target=target)
    result = promote_outputs(res)
    if wandb.project:
        result |= _log_wandb(res.handle, wandb)
    emit("promote", result, hub)


@cli.command("list")
@repo_option()
@click.option("--revision", help="Branch, tag or SHA to read (default: main).")
@hub_options
@command
def list_(repo: str, revision: str | None, hub: HubOptions) -> None:
    """Every checkpoint with its step, completeness, file count, size and the SHA it was read at."""
    repo = names.repo_id(repo)
    revision = names.revision(revision)
    settings = hub.settings()

    from ckpt_action.ci.outputs import list_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.discover import CheckpointInfo, list_checkpoints
    from ckpt_action.progress import human

    remote = RemoteRepo(settings, repo)
    try:
        remote.resolve(revision)
    except NotFoundError:
        if revision:
            raise
        warn(f"{repo} does not exist, or this token cannot see it: no checkpoints")
        sha, infos = None, list[CheckpointInfo]()
    else:
        sha, infos = list_checkpoints(remote, revision)

    def table() -> None:
        names = [escape(i.subfolder) for i in infos]
        width = max([len(n) for n in names] + [10])
        echo(f"{repo} at {sha or '(no commits)'}")
        echo(f"{'checkpoint':<{width}}  {'step':>8}  {'status':<10}  {'files':>5}  {'size':>10}")
        for name, i in zip(names, infos, strict=True):
            step = "" if i.step is None else str(i.step)
            why = f"  ({i.problem})" if i.problem else ""
            echo(f"{name:<{width}}  {step:>8}  {i.status:<10}  {i.files:>5}  {human(i.size):>10}{why}")

    emit("list", list_outputs(repo, sha, infos), hub, human=table)


@cli.command()
@repo_option()
@click.option("--keep-last", required=True, type=int, help="How many of the newest checkpoint-N to keep.")
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; change nothing.")
@hub_options
@command
def prune(repo: str, keep_last: int, dry_run: bool, hub: HubOptions) -> None:
    """Delete older checkpoint-N folders in one commit; never the latest complete one, sft/,
    promoted targets or their sources, or a checkpoint a tag points at."""
    repo = names.repo_id(repo)
    keep = names.positive(keep_last, "--keep-last")
    assert keep is not None
    settings = hub.settings()
    if not dry_run:
        names.token_for_write(settings.token, settings.endpoint)

    from ckpt_action.ci.outputs import prune_outputs
    from ckpt_action.hub.repo import RemoteRepo
    from ckpt_action.ops.release import prune as do_prune

    plan, sha = do_prune(RemoteRepo(settings, repo), keep, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    if not hub.as_json:
        for name in plan.delete:
            echo(f"{verb}: {name}", err=True)
        for name in plan.keep:
            echo(f"kept: {name} ({plan.reasons.get(name, '')})", err=True)
    emit("prune", prune_outputs(repo, plan, sha, dry_run), hub)


# --- the action and the demo ------------------------------------------------------------

@cli.command("from-action", hidden=True)
@click.pass_context
def from_action(ctx: click.Context) -> None:
    """Run the command the GitHub Action's INPUT_* environment describes (see action_inputs)."""
    from ckpt_action.ci.action_inputs import argv

    try:
        name, *args = argv()
    except InputError as exc:
        fail(str(exc), exc.exit_code)
    echo(f"ckpt-action {name} " + " ".join(args), err=True)
    sub = cli.commands[name]
    with sub.make_context(name, args, parent=ctx.parent) as sub_ctx:
        sub.invoke(sub_ctx)


@cli.command()
@click.option("--keep", type=click.Path(file_okay=False), help="Keep the demo's files in this dir.")
@command
def demo(keep: str | None) -> None:
    """Run the main job on an embedded local Hub: push, latest, pull, verify."""
    from ckpt_action.cli.demo import run_demo

    run_demo(keep=Path(keep) if keep else None, echo=click.echo)


# click >= 8.2 raises this for a bare `ckpt-action`; older versions print help and exit 0.
_NO_ARGS_IS_HELP: type[click.ClickException] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_Never", (click.ClickException,), {}))


def main(argv: list[str] | None = None) -> None:
    _setup_logging()
    try:
        cli.main(args=argv, prog_name="ckpt-action", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:
        click.echo(exc.format_message())
        sys.exit(EXIT_INPUT)
    except click.exceptions.Abort:
        fail("aborted", 130)
    except click.ClickException as exc:
        fail(f"{exc.format_message()} (see --help)", EXIT_INPUT)
