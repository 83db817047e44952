"""ckpt-action command line: parse, validate, call the core, emit outputs.

The same CLI runs from the GitHub Action, in the container image
(``docker run IMAGE push ...``), as the ``ckpt-action`` console script and by hand
(``python entrypoint.py`` in a checkout). It only handles arguments and output; the
work is done by the core modules it calls.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ckpt_action import __version__, validate
from ckpt_action.errors import CkptError, InputError, NoCheckpointError, NotFoundError
from ckpt_action.outputs import append_summary, summary_markdown, write_dotenv, write_github_output, write_json
from ckpt_action.settings import Settings

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_NONE = 0, 1, 2, 3


class _Secret:
    """The token, so every printed line can be scrubbed of it."""

    value: str | None = os.environ.get("HF_TOKEN") or None


def scrub(text: str) -> str:
    token = _Secret.value
    return text.replace(token, "***") if token and len(token) >= 4 else text


class _ScrubFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = ()
        return True


def _in_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def warn(message: str) -> None:
    message = scrub(" ".join(message.split()))
    prefix = "::warning::" if _in_actions() else "warning: "
    click.echo(f"{prefix}{message}", err=True)


def fail(message: str, code: int) -> None:
    message = scrub(" ".join(str(message).split()))
    prefix = "::error::" if _in_actions() else "error: "
    click.echo(f"{prefix}{message}", err=True)
    sys.exit(code)


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_ScrubFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


def _route_client_logs() -> None:
    """huggingface_hub adds its own stderr handler when imported, which would print each
    warning twice and skip the token scrubbing: send its records through ours only."""
    import huggingface_hub  # noqa: F401 - its import is what installs the handler

    logging.getLogger("huggingface_hub").handlers[:] = []


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options every Hub command takes."""
    options = [
        click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else the Hub)."),
        click.option("--token", envvar="HF_TOKEN", help="Hub token (default: HF_TOKEN). Never printed."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
        click.option("--dotenv", type=click.Path(dir_okay=False), help="Also write outputs as a dotenv file "
                     "(GitLab CI artifacts:reports:dotenv)."),
        click.option("--timeout", type=float, help="Seconds a request may stall (default 60; CKPT_TIMEOUT)."),
        click.option("--retries", type=int, help="Retries of transient failures (default 5; CKPT_RETRIES)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def settings_from(opts: dict[str, Any]) -> Settings:
    _Secret.value = opts.get("token") or _Secret.value
    settings = Settings.from_env(endpoint=opts.get("endpoint"), token=opts.get("token") or None,
                             timeout=opts.get("timeout"), retries=opts.get("retries"))
    from ckpt_action.hubclient import prepare

    prepare(settings)  # before the client's import, so its import-time switches fit the endpoint
    _route_client_logs()
    return settings


def emit(command: str, result: dict[str, Any], opts: dict[str, Any],
         human: Callable[[], None] | None = None) -> None:
    """Write the result everywhere it is wanted: stdout, GITHUB_OUTPUT, job summary, dotenv.

    ``summary_extra`` (markdown) goes to the job summary only; ``human`` prints the
    terminal form when it is not a plain key: value list.
    """
    result = dict(result)
    extra = result.pop("summary_extra", None)
    if os.environ.get("GITHUB_OUTPUT"):
        write_github_output(os.environ["GITHUB_OUTPUT"], result)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(os.environ["GITHUB_STEP_SUMMARY"], summary_markdown(command, result | {"summary_extra": extra}))
    if opts.get("dotenv"):
        write_dotenv(opts["dotenv"], result)
    if opts.get("as_json"):
        write_json(sys.stdout, result)
    elif human is not None:
        human()
    else:
        for key, value in result.items():
            if value is not None and not isinstance(value, (list, dict)):
                click.echo(f"{key}: {value}")


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn our errors into one stderr line and the exit code the error class carries."""

    @functools.wraps(fn)
    def wrapper(**opts: Any) -> None:
        try:
            fn(**opts)
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ckpt-action")
def cli() -> None:
    """Move training checkpoints between CI jobs and a Hugging Face Hub repo, pinned to commit SHAs.

    \b
    Exit codes: 0 done; 1 remote or I/O failure; 2 bad input (nothing was sent);
    3 `latest --require` / `pull --latest` found no complete checkpoint.
    """


# --- push ---------------------------------------------------------------------------------------

@cli.command()
@click.option("--repo", required=True, help="Hub model repo, OWNER/NAME.")
@click.option("--local-dir", required=True, help="The checkpoint directory to push.")
@click.option("--subfolder", help="Folder in the repo (default: checkpoint-STEP).")
@click.option("--step", type=int, help="Training step; alone, it names the subfolder checkpoint-STEP.")
@click.option("--private/--public", default=True, show_default=True,
              help="Visibility of the repo if push creates it (an existing repo is left as it is).")
@click.option("--commit-message", help="Commit title (default: 'Push SUBFOLDER (step N)').")
@click.option("--wandb-project", envvar="WANDB_PROJECT", help="Log a W&B pointer artifact to this project.")
@click.option("--wandb-entity", envvar="WANDB_ENTITY", help="W&B entity (team or user).")
@click.option("--wandb-run-id", envvar="WANDB_RUN_ID", help="Attach the pointer to this (training) run.")
@click.option("--wandb-artifact-name", help="Artifact name (default: derived from repo and subfolder).")
@click.option("--wandb-fatal", is_flag=True, help="Fail the command when W&B logging fails.")
@common
@command
def push(**o: Any) -> None:
    """Push a local checkpoint dir to REPO/SUBFOLDER and report the commit SHA that holds it complete.

    The subfolder ends up exactly equal to the local dir; a manifest is committed last.
    Identical content makes no commit and reports the current SHA.
    """
    repo = validate.repo_id(o["repo"])
    subfolder, step = validate.push_target(o["subfolder"], o["step"])
    local_dir = validate.local_dir_to_push(o["local_dir"])
    settings = settings_from(o)
    validate.token_for_write(settings.token, settings.endpoint)

    from ckpt_action.progress import quiet_client_bars
    from ckpt_action.push import push as do_push

    quiet_client_bars()
    res = do_push(settings, repo, local_dir, subfolder, step=step, private=o["private"],
                  commit_message=o["commit_message"])
    result: dict[str, Any] = res.handle.to_dict() | {
        "local_dir": str(local_dir), "found": None, "commits": res.commits,
        "uploaded_files": res.uploaded_files, "deleted_files": res.deleted_files}
    if o["wandb_project"]:
        result |= _log_wandb(res.handle, o)
    emit("push", result, o)


def _log_wandb(handle: Any, o: dict[str, Any], registry: str | None = None) -> dict[str, Any]:
    from ckpt_action import wandb_pointer

    try:
        pointer = wandb_pointer.log_pointer(handle, project=o["wandb_project"], entity=o["wandb_entity"] or None,
                                            run_id=o["wandb_run_id"] or None,
                                            artifact_name=o["wandb_artifact_name"] or None)
        if registry:
            try:
                ref = f"{pointer.entity}/{pointer.project}/{pointer.artifact_name}:latest"
                wandb_pointer.link_to_registry(ref, registry, project=pointer.project, entity=pointer.entity)
            except CkptError as exc:
                warn(f"the pointer is logged, but linking it into {registry} failed: {exc}")
    except CkptError as exc:
        if o["wandb_fatal"]:
            raise
        warn(f"the checkpoint is pushed, but W&B logging failed: {exc}")
        return {"wandb_artifact": None}
    return {"wandb_artifact": pointer.artifact_name, "wandb_run_id": pointer.run_id}


# --- latest -------------------------------------------------------------------------------------

@cli.command()
@click.option("--repo", required=True, help="Hub model repo, OWNER/NAME.")
@click.option("--revision", help="Branch or tag to look at (default: main).")
@click.option("--require", is_flag=True, help="Exit 3 when there is no complete checkpoint.")
@common
@command
def latest(**o: Any) -> None:
    """Find the highest complete checkpoint-N, pinned to the SHA it was read at.

    Nothing found exits 0 with found=false (3 with --require); a failure to tell exits 1.
    """
    repo = validate.repo_id(o["repo"])
    revision = validate.revision(o["revision"])
    settings = settings_from(o)

    from ckpt_action.discover import latest as find_latest
    from ckpt_action.remote import RemoteRepo

    res = find_latest(RemoteRepo(settings, repo), revision)
    _report_skipped(res, repo)
    if res.handle is None:
        result: dict[str, Any] = {"repo": repo, "subfolder": None, "revision": res.revision, "step": None,
                                  "hub_url": None, "found": False}
        emit("latest", result, o)
        if o["require"]:
            raise NoCheckpointError(f"no complete checkpoint-N in {repo}")
        return
    result = res.handle.to_dict() | {"found": True, "verified": res.has_manifest}
    emit("latest", result, o)


def _report_skipped(res: Any, repo: str) -> None:
    if res.repo_missing:
        warn(f"{repo} does not exist, or this token cannot see it: no checkpoint")
    for name, why in res.skipped:
        warn(f"skipped {name}: {why}")


# --- pull ---------------------------------------------------------------------------------------

@cli.command()
@click.option("--repo", help="Hub model repo, OWNER/NAME (from the pointer with --pointer).")
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
@common
@command
def pull(**o: Any) -> None:
    """Download one checkpoint at a pinned SHA, verify every file, then move it into place.

    Files already in --local-dir from an earlier pull, or in --cache-dir, are not downloaded again.
    """
    sources = [bool(o["subfolder"]), o["use_latest"], bool(o["pointer"]), bool(o["from_wandb"])]
    if sum(sources) != 1:
        raise InputError("pull needs exactly one of --subfolder, --latest, --pointer or --from-wandb")
    target = validate.pull_target(o["local_dir"], force=o["force"])
    from ckpt_action.cache import CacheConfig
    from ckpt_action.pull import Selection

    cache = CacheConfig.from_options(o["cache_dir"], target)
    select = Selection.from_options(o["include"], o["exclude"])
    revision = validate.revision(o["revision"])
    sha = None
    if o["pointer"] or o["from_wandb"]:
        if revision:
            raise InputError("--revision does not go with a pointer: the pointer pins the SHA")
        from ckpt_action import wandb_pointer

        timeout = o["timeout"] or 60.0
        pointed = (wandb_pointer.read_pointer(o["pointer"]) if o["pointer"]
                   else wandb_pointer.fetch_pointer(o["from_wandb"], timeout=timeout))
        if o["repo"] and validate.repo_id(o["repo"]) != pointed.repo:
            raise InputError(f"--repo {o['repo']} disagrees with the pointer's repo {pointed.repo}: drop --repo")
        repo, subfolder, sha = pointed.repo, pointed.subfolder, pointed.revision
        if not o["endpoint"] and not os.environ.get("HF_ENDPOINT"):
            o["endpoint"] = pointed.endpoint
    else:
        repo = validate.repo_id(o["repo"])
        subfolder = validate.subfolder(o["subfolder"]) if o["subfolder"] else ""
    settings = settings_from(o)

    from ckpt_action.progress import quiet_client_bars
    from ckpt_action.pull import pull as do_pull
    from ckpt_action.remote import RemoteRepo

    quiet_client_bars()
    remote = RemoteRepo(settings, repo)
    if o["use_latest"]:
        from ckpt_action.discover import latest as find_latest

        found = find_latest(remote, revision)
        _report_skipped(found, repo)
        if found.handle is None:
            raise NoCheckpointError(f"no complete checkpoint-N in {repo} to pull")
        subfolder, sha = found.handle.subfolder, found.handle.revision
    res = do_pull(remote, subfolder, revision, target, force=o["force"], sha=sha, select=select, cache=cache)
    result = res.handle.to_dict() | {
        "local_dir": str(res.local_dir), "found": True, "files": res.files, "bytes": res.bytes,
        "verified_by": res.verified_by, "partial": res.partial, "downloaded_files": res.downloaded_files,
        "downloaded_bytes": res.downloaded_bytes, "reused_files": res.reused_files,
        "cached_files": res.cached_files, "removed_files": res.removed_files}
    emit("pull", result, o)


# --- promote, list, prune -----------------------------------------------------------------------

@cli.command()
@click.option("--repo", required=True, help="Hub model repo holding the checkpoint, OWNER/NAME.")
@click.option("--subfolder", required=True, help="The checkpoint folder to promote.")
@click.option("--revision", help="SHA, branch or tag the checkpoint is read at (default: main's head).")
@click.option("--to", "to", required=True, help="Target folder, e.g. release.")
@click.option("--to-repo", help="Promote into another repo (bytes stream through, verified).")
@click.option("--tag", help="Tag the resulting commit; an existing tag elsewhere is refused.")
@click.option("--branch", help="Commit the promotion on this branch (created from the source SHA).")
@click.option("--wandb-project", envvar="WANDB_PROJECT", help="Log a W&B pointer artifact to this project.")
@click.option("--wandb-entity", envvar="WANDB_ENTITY", help="W&B entity (team or user).")
@click.option("--wandb-run-id", envvar="WANDB_RUN_ID", help="Attach the pointer to this run.")
@click.option("--wandb-artifact-name", help="Artifact name (default: derived from repo and target).")
@click.option("--wandb-registry", help="Link the pointer into this W&B registry collection (online only).")
@click.option("--wandb-fatal", is_flag=True, help="Fail the command when W&B logging fails.")
@common
@command
def promote(**o: Any) -> None:
    """Copy a pinned checkpoint to a release folder (and/or branch, tag) in one commit, server-side."""
    repo = validate.repo_id(o["repo"])
    subfolder = validate.subfolder(o["subfolder"])
    to = validate.subfolder(o["to"], flag="--to")
    revision = validate.revision(o["revision"])
    tag = validate.revision(o["tag"]) if o["tag"] else None
    branch = validate.revision(o["branch"]) if o["branch"] else None
    to_repo = validate.repo_id(o["to_repo"]) if o["to_repo"] else None
    if to_repo and branch:
        raise InputError("--branch does not go with --to-repo: promote into the other repo's main")
    settings = settings_from(o)
    validate.token_for_write(settings.token, settings.endpoint)

    from ckpt_action.progress import quiet_client_bars
    from ckpt_action.release import promote as do_promote
    from ckpt_action.remote import RemoteRepo

    quiet_client_bars()
    remote = RemoteRepo(settings, repo)
    target = RemoteRepo(settings, to_repo, api=remote.api) if to_repo else None
    res = do_promote(remote, subfolder, revision, to, tag=tag, branch=branch, target=target)
    result: dict[str, Any] = res.handle.to_dict() | {
        "found": None, "source_subfolder": res.source.subfolder, "source_revision": res.source.revision,
        "commits": res.commits, "tag": res.tag, "branch": res.branch}
    if o["wandb_project"]:
        result |= _log_wandb(res.handle, o, registry=o["wandb_registry"])
    emit("promote", result, o)


@cli.command("list")
@click.option("--repo", required=True, help="Hub model repo, OWNER/NAME.")
@click.option("--revision", help="Branch, tag or SHA to read (default: main).")
@common
@command
def list_(**o: Any) -> None:
    """Every checkpoint with its step, completeness, file count, size and the SHA it was read at."""
    repo = validate.repo_id(o["repo"])
    revision = validate.revision(o["revision"])
    settings = settings_from(o)

    from ckpt_action.discover import CheckpointInfo, list_checkpoints
    from ckpt_action.progress import human
    from ckpt_action.remote import RemoteRepo

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
    rows = [i.to_dict() for i in infos]
    markdown = "| checkpoint | step | status | files | size |\n|---|---|---|---|---|\n" + "".join(
        f"| `{i.subfolder}` | {'' if i.step is None else i.step} | {i.status} | {i.files} | {human(i.size)} |\n"
        for i in infos)
    newest = next((i for i in infos if i.complete and i.step is not None and i.subfolder.startswith("checkpoint-")),
                  None)
    result: dict[str, Any] = {
        "repo": repo, "subfolder": newest.subfolder if newest else None, "revision": sha,
        "step": newest.step if newest else None, "hub_url": None, "found": bool(infos), "count": len(infos),
        "checkpoints": rows, "summary_extra": "\n" + markdown if infos else "\nNo checkpoints.\n"}

    def table() -> None:
        width = max([len(i.subfolder) for i in infos] + [10])
        click.echo(f"{repo} at {sha or '(no commits)'}")
        click.echo(f"{'checkpoint':<{width}}  {'step':>8}  {'status':<10}  {'files':>5}  {'size':>10}")
        for i in infos:
            step = "" if i.step is None else str(i.step)
            click.echo(f"{i.subfolder:<{width}}  {step:>8}  {i.status:<10}  {i.files:>5}  {human(i.size):>10}")

    emit("list", result, o, human=table)


@cli.command()
@click.option("--repo", required=True, help="Hub model repo, OWNER/NAME.")
@click.option("--keep-last", required=True, type=int, help="How many of the newest checkpoint-N to keep.")
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; change nothing.")
@common
@command
def prune(**o: Any) -> None:
    """Delete older checkpoint-N folders in one commit; never the latest complete one, sft/,
    promoted targets or their sources, or a checkpoint a tag points at."""
    repo = validate.repo_id(o["repo"])
    keep = validate.positive(o["keep_last"], "--keep-last")
    assert keep is not None
    settings = settings_from(o)
    if not o["dry_run"]:
        validate.token_for_write(settings.token, settings.endpoint)

    from ckpt_action.release import prune as do_prune
    from ckpt_action.remote import RemoteRepo

    plan, sha = do_prune(RemoteRepo(settings, repo), keep, dry_run=o["dry_run"])
    verb = "would delete" if o["dry_run"] else "deleted"
    if not o["as_json"]:
        for name in plan.delete:
            click.echo(f"{verb}: {name}", err=True)
        for name in plan.keep:
            click.echo(f"kept: {name} ({plan.reasons.get(name, '')})", err=True)
    result: dict[str, Any] = {
        "repo": repo, "subfolder": None, "revision": sha, "step": None, "hub_url": None, "found": None,
        "dry_run": o["dry_run"], "deleted": plan.delete, "kept": plan.keep,
        "deleted_count": len(plan.delete), "summary_extra": "\n" + "".join(
            f"- {verb} `{n}/`\n" for n in plan.delete) if plan.delete else "\nNothing to delete.\n"}
    emit("prune", result, o)


# --- local hub and demo -------------------------------------------------------------------------

@cli.command("local-hub")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Where repos are stored.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=0, show_default=True, type=int, help="Port; 0 picks a free one.")
@click.option("--port-file", type=click.Path(dir_okay=False), help="Write the port here once listening.")
@click.option("--access-log", type=click.Path(dir_okay=False), help="One JSON line per request.")
@click.option("--faults", type=click.Path(dir_okay=False), help="JSON fault rules, re-read when changed.")
@click.option("--token", help="Require this bearer token (default: open).")
@command
def local_hub(**o: Any) -> None:
    """Run the Hub-compatible local server (prints its URL as the first line once listening)."""
    from ckpt_action.localhub import run_server

    run_server(o["data_dir"], host=o["host"], port=o["port"], port_file=o["port_file"],
               access_log=o["access_log"], faults=o["faults"], token=o["token"])


@cli.command()
@click.option("--keep", type=click.Path(file_okay=False), help="Keep the demo's files in this dir.")
@command
def demo(**o: Any) -> None:
    """Run the main job on an embedded local Hub: push, latest, pull, verify."""
    from ckpt_action.demo import run_demo

    run_demo(keep=Path(o["keep"]) if o["keep"] else None, echo=click.echo)


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
