"""ckpt-action command line: parse, call the Python API, render, map errors to exit codes.

The same CLI runs from the GitHub Action, in the container image
(``docker run IMAGE push ...``), as the ``ckpt-action`` console script and by hand
(``python entrypoint.py`` in a checkout). It is a door onto :class:`ckpt_action.client.Client`,
where every command's steps live (checks, settings, the operation) and where errors are
translated for both doors; it imports nothing below the client (an import-linter contract
holds it to that) and renders what the client answers:
text, JSON, step outputs, dotenv, job summary. Errors name parameters, which this door
spells as flags (``--tag``), or as inputs (``input 'tag'``) when the action runs it. A
command changes no global state, so tests run it in-process (Click's ``CliRunner``);
what is process-wide (logging, the client's progress bars) is set in :func:`main`.
Options shared by several commands are defined once in :mod:`.options`; printing, the
outputs and the exit codes are :mod:`.render`'s.

A little over 400 lines on purpose: one Click command per mode, each with its options and
help text, which read best side by side.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import click

from ckpt_action import boundary
from ckpt_action import client as core
from ckpt_action.ci.escaping import escape
from ckpt_action.cli.options import (
    COUNT,
    NUMBER,
    STEP,
    HubOptions,
    WandbOptions,
    best_option,
    card_option,
    hub_options,
    metric_option,
    repo_option,
    retention_options,
    signing_options,
    verify_options,
    wandb_options,
)
from ckpt_action.cli.render import (
    DOOR_KEY,
    EXIT_FAIL,
    EXIT_INPUT,
    command,
    door,
    echo,
    emit,
    fail,
    fail_with,
    json_asked,
    note,
    print_json,
    route_client_logs,
    setup_logging,
    warn,
)
from ckpt_action.errors import CkptError, InputError, NoCheckpointError, param
from ckpt_action.version import __version__
from ckpt_action.watch.markers import FORMATS

if TYPE_CHECKING:
    from ckpt_action.handle import CheckpointHandle
    from ckpt_action.options import Retention, Signing, Verification

_LISTING_KEY = "ckpt_action.listing"  # set in a context's meta while --help lists the commands


class _Group(click.Group):
    """The commands, with those defined elsewhere loaded only when named: the local Hub
    owns its command line (in its own distribution, which may not be installed), and
    importing it would slow every other command's start."""

    elsewhere: ClassVar[dict[str, tuple[str, str]]] = {"local-hub": ("ckpt_localhub.command", "local_hub")}
    # What `--help` lists for them, said here: listing the commands imports none of them (the
    # package may lack a dependency, and its import is the slow part of a start).
    # tests/integration/test_help_imports.py checks each against the command's own help.
    elsewhere_help: ClassVar[dict[str, str]] = {
        "local-hub": "Run the Hub-compatible local server (prints its URL as the first line once listening)."}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.elsewhere])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[_LISTING_KEY] = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            ctx.meta.pop(_LISTING_KEY, None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.elsewhere and ctx.meta.get(_LISTING_KEY):
            from ckpt_action.cli.localhub import installed, not_installed

            if installed():  # found on the path, not imported
                return click.Command(cmd_name, help=self.elsewhere_help[cmd_name])
            return _missing(cmd_name, not_installed(cmd_name))
        if cmd_name in self.elsewhere:
            from ckpt_action.cli.localhub import import_local_hub

            module, name = self.elsewhere[cmd_name]
            try:
                command: click.Command = getattr(import_local_hub(cmd_name, module), name)
            except InputError as exc:
                return _missing(cmd_name, exc)
            return command
        return super().get_command(ctx, cmd_name)


def _missing(name: str, exc: InputError) -> click.Command:
    """A command whose package is not installed: listed in the help, and run (whatever its
    arguments, --help included) it says in one line what to install."""

    def run() -> None:
        fail_with(exc)

    return click.Command(name, callback=run, help="(not installed) " + str(exc), add_help_option=False,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ckpt-action")
def cli() -> None:
    """Move training checkpoints between CI jobs and a Hugging Face Hub repo, pinned to commit SHAs.

    \b
    Try it with no account and no network: `ckpt-action demo` (an embedded local Hub).
    The Hub and its token come from HF_ENDPOINT (default https://huggingface.co) and
    HF_TOKEN (or a token saved by `hf auth login`); --endpoint and --token override them.

    \b
    Exit codes: 0 done; 1 remote or I/O failure; 2 bad input (nothing was sent);
    3 `latest --require` / `pull --latest` found no complete checkpoint.
    """


# --- push ---------------------------------------------------------------------------------------

@cli.command()
@repo_option()
@click.option("--local-dir", required=True, help="The checkpoint directory to push.")
@click.option("--subfolder", help="Folder in the repo (default: checkpoint-STEP).")
@click.option("--step", type=STEP, help="Training step; alone, it names the subfolder checkpoint-STEP.")
@click.option("--private/--public", default=True, show_default=True,
              help="Visibility of the repo if push creates it (an existing repo is left as it is).")
@click.option("--commit-message", help="Commit title (default: 'Push SUBFOLDER (step N)').")
@metric_option
@card_option
@signing_options
@click.option("--distributed", is_flag=True, help="Run on every rank of a torchrun job (needs torch): each rank "
              "uploads its own --local-dir, one commit lands; without RANK/WORLD_SIZE a push alone.")
@wandb_options()
@hub_options
@command
def push(repo: str, local_dir: str, subfolder: str | None, step: int | None, private: bool,
         commit_message: str | None, metrics: tuple[str, ...], card: bool, signing: Signing, distributed: bool,
         wandb: WandbOptions, hub: HubOptions) -> None:
    """Push a local checkpoint dir to REPO/SUBFOLDER and report the commit SHA that holds it complete.

    The subfolder ends up exactly equal to the local dir; a manifest is committed last.
    Identical content makes no commit and reports the current SHA.
    """
    from ckpt_action.ci.outputs import push_outputs

    scores = core.metrics_from_text(metrics) if metrics else None
    res = hub.client().push(local_dir, repo, step=step, subfolder=subfolder, private=private,
                            commit_message=commit_message, signing=signing, distributed=distributed,
                            join_job=distributed, note=note, metrics=scores, card=card)
    result = push_outputs(res)
    if wandb.project:
        result |= _log_wandb(res.handle, wandb)
    emit("push", result, hub)


def _log_wandb(handle: CheckpointHandle, wandb: WandbOptions) -> dict[str, Any]:
    assert wandb.project is not None
    try:
        # run=None and a run id (or none): this process has no run of its own to log to.
        pointer = core.Client().log_pointer(handle, None, project=wandb.project, entity=wandb.entity,
                                            run_id=wandb.run_id, artifact_name=wandb.artifact_name,
                                            registry=wandb.registry, warn=warn)
    except CkptError as exc:
        if wandb.fatal:
            raise
        warn(f"the checkpoint is pushed, but W&B logging failed: {exc.render(door())}")
        return {"wandb_artifact": None}
    return {"wandb_artifact": pointer.artifact_name, "wandb_run_id": pointer.run_id}


# --- latest -------------------------------------------------------------------------------------

@cli.command()
@repo_option()
@click.option("--revision", help="Branch, tag or SHA to look at (default: main).")
@click.option("--require", is_flag=True, help="Exit 3 when there is no complete checkpoint.")
@best_option
@verify_options
@hub_options
@command
def latest(repo: str, revision: str | None, require: bool, best: str | None, verify: Verification,
           hub: HubOptions) -> None:
    """Find the highest complete checkpoint-N, pinned to the SHA it was read at.

    Nothing found exits 0 with found=false (3 with --require); a failure to tell exits 1.
    """
    from ckpt_action.ci.outputs import latest_outputs

    try:
        res = hub.client().latest(repo, revision=revision, require=require, verification=verify, warn=warn,
                                  best=best)
    except NoCheckpointError as exc:  # --require: the outputs say found=false, then exit 3
        found = getattr(exc, "found", None)
        if found is not None:
            emit("latest", latest_outputs(repo, found), hub, failing=True)
        raise
    emit("latest", latest_outputs(repo, res), hub)


# --- pull ---------------------------------------------------------------------------------------

@cli.command()
@repo_option("Hub model repo, OWNER/NAME, or a bucket, hf://buckets/OWNER/NAME[/PREFIX] (from the pointer with"
             " --pointer).", required=False)
@click.option("--subfolder", help="Folder to pull.")
@click.option("--latest", "use_latest", is_flag=True, help="Pull the highest complete checkpoint-N.")
@click.option("--pointer", type=click.Path(), help="A W&B pointer checkpoint.json (or its dir) to pull.")
@click.option("--from-wandb", help="A W&B artifact ENTITY/PROJECT/NAME:ALIAS holding a pointer (online).")
@click.option("--revision", help="A commit SHA, branch or tag (default: main).")
@click.option("--local-dir", required=True, help="Where the checkpoint's files go: a new or empty dir, or one "
              "holding an earlier pull (updated in place: only what changed is downloaded).")
@click.option("--force", is_flag=True, help="Overwrite files of an earlier pull that were edited since. Never "
              "deletes a file ckpt-action did not write.")
@click.option("--include", multiple=True, metavar="GLOB", help="Pull only files matching this pattern (path "
              "inside the folder; repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files matching this pattern (repeatable).")
@click.option("--cache-dir", envvar="CKPT_CACHE_DIR", help="Keep verified files here by sha256 and fill later "
              "pulls from it (CKPT_CACHE_DIR; size: CKPT_CACHE_MAX_SIZE, default 50G).")
@verify_options
@hub_options
@command
def pull(repo: str | None, subfolder: str | None, use_latest: bool, pointer: str | None, from_wandb: str | None,
         revision: str | None, local_dir: str, force: bool, include: tuple[str, ...], exclude: tuple[str, ...],
         cache_dir: str | None, verify: Verification, hub: HubOptions) -> None:
    """Download one checkpoint at a pinned SHA, verify every file, then move it into place.

    Files already in --local-dir from an earlier pull, or in --cache-dir, are not downloaded again.
    """
    if not (subfolder or use_latest or pointer or from_wandb):
        raise core.one_source_error()
    from ckpt_action.ci.outputs import pull_outputs

    res = hub.client().pull(repo, local_dir, subfolder=subfolder or None, revision=revision, latest=use_latest,
                            pointer=pointer or None, from_wandb=from_wandb or None, force=force, include=include,
                            exclude=exclude, cache_dir=cache_dir, verification=verify, warn=warn)
    emit("pull", pull_outputs(res), hub)


# --- promote, list, prune -----------------------------------------------------------------------

@cli.command()
@repo_option("Hub model repo holding the checkpoint, OWNER/NAME, or a bucket, hf://buckets/OWNER/NAME[/PREFIX].")
@click.option("--subfolder", help="The checkpoint folder to promote (or --best).")
@click.option("--revision", help="SHA, branch or tag the checkpoint is read at (default: main's head).")
@click.option("--to", "to", required=True, help="Target folder, e.g. release.")
@click.option("--to-repo", help="Promote into another repo (bytes stream through, verified).")
@click.option("--tag", help="Tag the resulting commit; an existing tag elsewhere is refused.")
@click.option("--branch", help="Commit the promotion on this branch (created from the source SHA).")
@click.option("--as-model", is_flag=True,
              help="Make the target a folder from_pretrained loads: weights (DCP or .bin converted to safetensors),"
                   " config, generation config, tokenizer, processor, model card, license; no optimizer,"
                   " scheduler, RNG, trainer state, training arguments or pickle.")
@click.option("--max-shard-size",
              help="With --as-model: the largest safetensors file a conversion writes (bytes, or 5GB, 500MB;"
                   " default 5GB), sharded with model.safetensors.index.json past it.")
@click.option("--strip-prefix",
              help="With --as-model: a prefix taken off converted tensor names (model. for a state dict saved"
                   " with a wrapper); tensors without it are left out.")
@best_option
@card_option
@signing_options
@wandb_options(registry=True)
@hub_options
@command
def promote(repo: str, subfolder: str | None, revision: str | None, to: str, to_repo: str | None, tag: str | None,
            branch: str | None, as_model: bool, max_shard_size: str | None, strip_prefix: str | None,
            best: str | None, card: bool, signing: Signing, wandb: WandbOptions, hub: HubOptions) -> None:
    """Copy a pinned checkpoint to a release folder (and/or branch, tag) in one commit, server-side."""
    from ckpt_action.ci.outputs import promote_outputs

    res = hub.client().promote(repo, to, subfolder=subfolder, revision=revision, to_repo=to_repo, tag=tag,
                               branch=branch, signing=signing, best=best, card=card, warn=warn,
                               as_model=as_model, max_shard_size=max_shard_size or None,
                               strip_prefix=strip_prefix or None)
    if res.left_out:
        click.echo(f"{escape(res.handle.subfolder)}: left out {len(res.left_out)} file(s) of"
                   f" {escape(res.source.subfolder)}: {escape(', '.join(res.left_out))[:2000]}", err=True)
    result = promote_outputs(res)
    if wandb.project:
        result |= _log_wandb(res.handle, wandb)
    tags = {res.handle.subfolder: [res.tag]} if res.tag else {}
    emit("promote", result, hub, checkpoints=_card_table(hub, res.handle.repo, res.handle.revision, tags))


@cli.command("list")
@repo_option()
@click.option("--revision", help="Branch, tag or SHA to read (default: main).")
@hub_options
@command
def list_(repo: str, revision: str | None, hub: HubOptions) -> None:
    """Every checkpoint with its step, completeness, file count, size and the SHA it was read at."""
    from ckpt_action.ci.outputs import checkpoints_table, list_outputs
    from ckpt_action.progress import human

    res = hub.client().list(repo, revision=revision, warn=warn, tags=bool(os.environ.get("GITHUB_STEP_SUMMARY")))
    sha, infos = res.revision, res.checkpoints

    def table() -> None:
        names = [escape(i.subfolder) for i in infos]
        width = max([len(n) for n in names] + [10])
        echo(f"{repo} at {sha or '(no commits)'}")
        echo(f"{'checkpoint':<{width}}  {'step':>8}  {'status':<10}  {'files':>5}  {'size':>10}")
        for name, i in zip(names, infos, strict=True):
            step = "" if i.step is None else str(i.step)
            why = f"  ({i.problem})" if i.problem else ""
            why += f"  (metrics unusable: {i.metrics_problem})" if i.metrics_problem else ""
            scores = "".join(f"  {k}={v:.6g}" for k, v in sorted((i.metrics or {}).items()))
            src = i.source or {}
            made = (f"  from {escape(src['repo']) + '/' if src.get('repo') not in (None, repo) else ''}"
                    f"{escape(src.get('subfolder', '?'))}@{src.get('revision', '?')[:12]}" if src else "")
            echo(f"{name:<{width}}  {step:>8}  {i.status:<10}  {i.files:>5}  {human(i.size):>10}{scores}{made}{why}")

    emit("list", list_outputs(res), hub, human=table, checkpoints=lambda: checkpoints_table(res))


@cli.command()
@repo_option()
@retention_options
@card_option
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; change nothing.")
@click.option("--free-storage", is_flag=True,
              help="Also free the Hub storage only the pruned checkpoints held (their LFS objects are deleted "
                   "for good; no SHA changes; their old SHAs no longer pull).")
@hub_options
@command
def prune(repo: str, retention: Retention, card: bool, dry_run: bool, free_storage: bool, hub: HubOptions) -> None:
    """Delete older checkpoint-N folders in one commit, keeping what any of --keep-last,
    --keep-every, --keep-best keeps; never the latest complete one, sft/, promoted targets
    or their sources, or a checkpoint a tag points at."""
    from ckpt_action.ci.outputs import prune_outputs
    from ckpt_action.progress import human

    res = hub.client().prune(repo, dry_run=dry_run, free_storage=free_storage, retention=retention, card=card)
    verb = "would delete" if dry_run else "deleted"
    if not hub.as_json:
        for name in res.deleted:
            echo(f"{verb}: {name}", err=True)
        for name, why in res.kept.items():
            echo(f"kept: {name} ({why})", err=True)
        if res.free_storage:  # --free-storage, or a bucket, whose prune frees at once
            freed = "would free" if dry_run else "freed"
            before, after = _maybe_size(res.used_storage_before), _maybe_size(res.used_storage_after)
            objects = "" if res.freed_objects is None else f" in {res.freed_objects} object(s)"
            echo(f"{freed}: {human(res.freed_bytes or 0)} of Hub storage{objects}"
                 f" (used before: {before}, after: {after})", err=True)
    emit("prune", prune_outputs(res), hub, checkpoints=_card_table(hub, repo, res.revision))


def _card_table(hub: HubOptions, repo: str, revision: str | None,
                tags: dict[str, list[str]] | None = None) -> Callable[[], str]:
    """Reads, when called, the checkpoints of ``repo`` at ``revision`` (the commit a prune or
    promote made, or read; a bucket, which keeps no commits, as it is now) and renders the
    model card's table of them for the job summary."""
    from ckpt_action.ci.outputs import checkpoints_table
    from ckpt_action.names import bucket

    at = None if bucket(repo) is not None else revision
    return lambda: checkpoints_table(hub.client().list(repo, revision=at, warn=warn, tags=True), tags)


def _maybe_size(value: int | None) -> str:
    from ckpt_action.progress import human

    return "unknown" if value is None else human(value)


# --- watch --------------------------------------------------------------------------------------

@cli.command(context_settings={"allow_interspersed_args": False})
@repo_option()
@click.option("--local-dir", required=True, help="The dir the training saves its checkpoints in (watched; it may "
              "not exist yet).")
@click.option("--pattern", help="Regular expression for a checkpoint's whole name, with one capture group for the "
              r"step (default: checkpoint[-_](\d+); by --format: step=(\d+) in a Lightning file's name, (\d+) "
              "for Orbax).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
              help="The framework that writes the checkpoints (what marks one complete); auto tells it from the dir.")
@click.option("--settle", type=NUMBER, default=10.0, show_default=True, help="Seconds a checkpoint without a "
              "framework's marker must stay unchanged (sizes, mtimes) before it is pushed.")
@click.option("--grace", type=NUMBER, default=25.0, show_default=True, help="Seconds after SIGTERM/SIGINT to push "
              "the newest complete checkpoint and stop (a preemption notice: ~30 s on GKE, 120 s on AWS spot);"
              " CKPT_PREEMPT_DEADLINE, when set, replaces it.")
@retention_options
@click.option("--commits-per-hour", type=COUNT, default=128, show_default=True, help="The Hub's commit quota per "
              "repo: past it only the newest complete checkpoint is pushed, the others are reported skipped.")
@click.option("--private/--public", default=True, show_default=True,
              help="Visibility of the repo if the first push creates it.")
@hub_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND ...]")
@command
def watch(repo: str, local_dir: str, pattern: str | None, fmt: str, settle: float, grace: float,
          retention: Retention, commits_per_hour: int, private: bool, hub: HubOptions,
          command: tuple[str, ...]) -> None:
    """Push every complete checkpoint the training writes to --local-dir, once, in step order.

    With `-- COMMAND ...` it runs the command (the training) as its child, forwards signals to it,
    pushes what is waiting when it exits and exits with its status (1 if that is 0 and a push
    failed). Without one it runs until SIGTERM/SIGINT. On SIGTERM it forwards the signal, waits
    for the save in progress, pushes the newest complete checkpoint first and stops within
    --grace seconds, reporting what it could not push. Uploads run in a child process at a lower
    CPU and I/O priority. Each checkpoint lands as checkpoint-STEP, so `latest` and `pull` find it,
    with the evaluation metrics the Trainer logged at that step. With --keep-last, --keep-every or
    --keep-best it prunes the Hub as pushes land (what any of them keeps is kept).
    """
    from ckpt_action.watch.watcher import Watcher

    watcher = Watcher(local_dir, repo, pattern=pattern, format=fmt, settle=settle, grace=grace, **retention.keywords(),
                      commits_per_hour=commits_per_hour, private=private, log=lambda m: echo(f"watch: {m}", err=True),
                      client=hub.client())
    report = watcher.run(command)
    code = report.exit_code()
    if hub.as_json:  # one object: when the exit is not 0, the error's (which carries the report)
        print_json(report.as_dict(), failing=bool(code))
    else:
        for name, subfolder, revision in report.pushed:
            echo(f"pushed: {name} -> {subfolder} at {revision}")
        for name in report.skipped:
            echo(f"skipped (commit quota): {name}")
        for name, why in {**report.failed, **report.left, **report.refused}.items():
            echo(f"not pushed: {name} ({why})")
    if code and hub.as_json:
        fail(_watch_error(report, code), code)
    if code:
        sys.exit(code)


def _watch_error(report: Any, code: int) -> str:
    """What a watch that exits ``code`` (not 0) says went wrong, in one line."""
    status = report.command_status
    if status is not None and status < 0:
        return f"the command was killed by signal {-status}"
    if status:
        return f"the command exited with status {status}"
    names = [*report.failed, *report.left, *report.refused]
    return f"{len(names)} checkpoint(s) not pushed: {', '.join(names)[:500]}"


# --- the action and the demo ------------------------------------------------------------

def click_error(exc: click.ClickException) -> InputError:
    """Click's own parsing error as ours, naming the parameter so each door can spell it:
    ``input 'step' must be a whole number``, not ``Invalid value for '--step'``."""
    name = getattr(getattr(exc, "param", None), "name", None)
    if not isinstance(exc, click.BadParameter) or not name:
        return InputError(exc.format_message())
    kind = getattr(exc.param, "type", None)
    detail = str(exc.message).rstrip(".")
    if isinstance(exc, click.MissingParameter):
        return InputError(f"{param(name)} is required", param=name)
    if isinstance(kind, click.types.IntParamType):
        return InputError(f"{param(name)} must be a whole number ({detail})", param=name)
    if isinstance(kind, click.types.FloatParamType):
        return InputError(f"{param(name)} must be a number ({detail})", param=name)
    return InputError(f"{param(name)}: {detail}", param=name)


@cli.command("from-action", hidden=True)
@click.option("--print-mounts", is_flag=True, help="Only check the inputs, then print the host paths a container"
              " run must mount, one 'create|mount|readonly<TAB>PATH' a line, and exit.")
@click.option("--check", "check_only", is_flag=True, help="Only run the command's own checks of its inputs, all"
              " it makes before its first request, and exit (0: the command would start).")
@click.pass_context
def from_action(ctx: click.Context, print_mounts: bool, check_only: bool) -> None:
    """Run the command the GitHub Action's INPUT_* environment describes (see action_inputs).

    Errors name the action's inputs (``input 'tag'``), also those Click finds while
    parsing (a ``step`` that is not a whole number). ``--print-mounts`` checks the inputs
    and that each mount can be given to ``--volume``; ``--check`` runs the command itself up
    to its first request (:func:`ckpt_action.boundary.checks_only`: the very checks of the real
    run, once, not a copy of them). action/container.sh runs both, the second with the
    listed paths mounted, before it creates any dir, so a step that will exit 2 creates
    nothing.
    """
    from ckpt_action.ci.action_inputs import argv, mounts

    ctx.meta[DOOR_KEY] = "action"
    try:
        name, *args = argv()
        planned = mounts() if print_mounts else []
    except InputError as exc:
        fail_with(exc)
    sub = cli.commands[name]
    try:
        sub_ctx = sub.make_context(name, list(args), parent=ctx.parent)  # types and options, as the run will
    except click.ClickException as exc:
        fail_with(click_error(exc))
    if print_mounts:
        for path, how in planned:
            click.echo(f"{how}\t{path}")
        return
    if check_only:
        try:
            with sub_ctx, boundary.checks_only():
                sub.invoke(sub_ctx)
        except boundary.InputsChecked:
            return
        fail(f"{name} ran to its end without a request: nothing to check it against", EXIT_FAIL)
    echo(f"ckpt-action {name} " + " ".join(args), err=True)
    with sub_ctx:
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


def console() -> None:
    """The process's entry (the ``ckpt-action`` script, ``python -m ckpt_action``,
    ``entrypoint.py``): :func:`main`, then the process ends as soon as its output is out.

    Tearing the interpreter down (freeing every module of huggingface_hub, httpx and
    hf_xet one object at a time) took 60 to 90 ms of every command on this project's
    2-core machines, after its last byte was written; mypy ends its process the same way
    for the same reason. What the teardown would run that matters still runs: the exit
    handlers (logging's flush, temporary directories' cleanup, the W&B client's), then the
    streams' flush. A thread still running (an executor's worker, a client's) means the
    usual exit, which waits for it."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # a message, as Python prints it
            print(exc.code, file=sys.stderr)
            code = 1
    _end_process(code)


def _end_process(code: int) -> None:
    import atexit
    import threading

    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if others or run_handlers is None:
        sys.exit(code)
    run_handlers()
    if any(t is not threading.current_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)  # a handler started one
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream: nothing to keep
            code = code or 1
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    """The command line: what is process-wide is set here, once, then the command runs
    (exiting with its code, ``SystemExit``)."""
    setup_logging()
    route_client_logs()
    from ckpt_action.progress import quiet_client_bars

    quiet_client_bars()
    run(argv)


def run(argv: list[str] | None = None) -> None:
    """Parse ``argv`` and run the command, exiting with its code (``SystemExit``). Changes
    no global state, so tests call it in-process."""
    args = list(sys.argv[1:] if argv is None else argv)
    # --json among the options (not after `--`, which starts a watched command's own):
    # an error Click finds while parsing, before any command's options exist, is JSON too.
    as_json = "--json" in args[:args.index("--") if "--" in args else len(args)]
    try:
        with json_asked(as_json):
            cli.main(args=args, prog_name="ckpt-action", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:
        click.echo(exc.format_message())
        sys.exit(EXIT_INPUT)
    except click.exceptions.Abort:
        fail("aborted", 130, as_json=as_json)
    except click.ClickException as exc:
        fail(f"{exc.format_message()} (see --help)", EXIT_INPUT, option=_option_named(exc), as_json=as_json)


def _option_named(exc: click.ClickException) -> str | None:
    """The option a parsing error is about, as typed (``--step``), when it names one."""
    name = getattr(exc, "option_name", None)  # NoSuchOption, BadOptionUsage
    if name:
        return str(name)
    opts = getattr(getattr(exc, "param", None), "opts", None)
    return str(opts[0]) if opts else None
