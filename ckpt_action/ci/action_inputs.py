"""The GitHub Action's inputs, as CLI arguments: one table, read from ``INPUT_*``.

``action.yml`` hands every input to ``action/run.sh`` as an ``INPUT_<NAME>`` environment
variable (nothing is spliced into code); the shell only picks the runtime and runs
``ckpt-action from-action``, which calls :func:`argv` to turn the inputs of the chosen
mode into the same command line a user would type. A test holds :data:`INPUTS` and
``action.yml`` together in both directions, and checks that every CLI option a workflow
needs is reachable from some input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ckpt_action.errors import InputError

MODES = ("push", "latest", "pull", "promote", "list", "prune")
HUB_MODES = MODES
SHELL_MODES = ("setup",)
"""Modes the shell runs alone (action/run.sh): ``setup`` puts ``ckpt-action`` on PATH for
later steps (``ckpt-action watch ... -- python train.py``); no CLI command reads their inputs."""
# Inputs the shell consumes before the CLI runs: the runtime, and the token, which only
# ever travels as HF_TOKEN.
SHELL_INPUTS = ("mode", "token", "runtime", "image", "python")

Kind = Literal["value", "flag", "switch", "path", "lines"]
Mount = Literal["", "parent", "dir", "containing", "file"]
MountHow = Literal["mount", "create", "readonly"]


@dataclass(frozen=True)
class Input:
    name: str
    """The input's name in action.yml (kebab-case)."""
    option: str
    """The CLI option it becomes (``--public`` is the off side of a ``switch``)."""
    modes: tuple[str, ...]
    kind: Kind = "value"
    """``value``: passed as given; ``path``: made absolute against the workspace;
    ``flag``: ``true`` adds the option; ``switch``: ``true``/``false`` pick
    ``--X``/``--no-X``-style sides, empty leaves the CLI default; ``lines``: one option
    per non-empty line."""
    required_in: tuple[str, ...] = ()
    off: str | None = None
    """The other side of a ``switch``."""
    mount: Mount = ""
    """How the container runtime makes a ``path`` outside the work dir reachable at the same
    path inside (:func:`mounts`): ``parent``, its parent dir (a pull renames a staged dir
    onto the path, which a mount point refuses); ``dir``, the dir itself; ``containing``,
    the dir holding it (a file or dir that must exist); ``file``, the file alone, read-only (a
    key written to RUNNER_TEMP reaches the container, nothing else of that dir does)."""
    created_in: tuple[str, ...] = ()
    """Modes that write under a mounted ``path``, so the dir is made before it is mounted,
    or what is written there dies with the container; a push only reads its local dir,
    which must exist already, and creates nothing."""


INPUTS: tuple[Input, ...] = (
    Input("repo", "--repo", HUB_MODES, required_in=("push", "latest", "promote", "list", "prune")),
    Input("subfolder", "--subfolder", ("push", "pull", "promote")),
    Input("step", "--step", ("push",)),
    Input("local-dir", "--local-dir", ("push", "pull"), "path", required_in=("push", "pull"), mount="parent",
          created_in=("pull",)),
    Input("revision", "--revision", ("latest", "pull", "promote", "list")),
    Input("endpoint", "--endpoint", HUB_MODES),
    Input("auth", "--auth", HUB_MODES),
    Input("private", "--private", ("push",), "switch", off="--public"),
    Input("require", "--require", ("latest",), "flag"),
    Input("force", "--force", ("pull",), "flag"),
    Input("commit-message", "--commit-message", ("push",)),
    Input("to", "--to", ("promote",), required_in=("promote",)),
    Input("to-repo", "--to-repo", ("promote",)),
    Input("pointer", "--pointer", ("pull",), "path", mount="containing"),
    Input("from-wandb", "--from-wandb", ("pull",)),
    Input("include", "--include", ("pull",), "lines"),
    Input("exclude", "--exclude", ("pull",), "lines"),
    Input("cache-dir", "--cache-dir", ("pull",), "path", mount="dir", created_in=("pull",)),
    Input("tag", "--tag", ("promote",)),
    Input("branch", "--branch", ("promote",)),
    Input("as-model", "--as-model", ("promote",), "flag"),
    Input("max-shard-size", "--max-shard-size", ("promote",)),
    Input("strip-prefix", "--strip-prefix", ("promote",)),
    Input("keep-last", "--keep-last", ("prune",)),
    Input("keep-every", "--keep-every", ("prune",)),
    Input("keep-best", "--keep-best", ("prune",)),
    Input("metrics", "--metric", ("push",), "lines"),
    Input("best", "--best", ("latest", "promote")),
    Input("card", "--card", ("push", "prune", "promote"), "flag"),
    Input("dry-run", "--dry-run", ("prune",), "flag"),
    Input("free-storage", "--free-storage", ("prune",), "flag"),
    Input("wandb-project", "--wandb-project", ("push", "promote")),
    Input("wandb-entity", "--wandb-entity", ("push", "promote")),
    Input("wandb-run-id", "--wandb-run-id", ("push", "promote")),
    Input("wandb-artifact-name", "--wandb-artifact-name", ("push", "promote")),
    Input("wandb-registry", "--wandb-registry", ("promote",)),
    Input("wandb-fatal", "--wandb-fatal", ("push", "promote"), "flag"),
    Input("signing-key", "--signing-key", ("push", "promote"), "path", mount="file"),
    Input("signing-certificate", "--signing-certificate", ("push", "promote"), "path", mount="file"),
    Input("signing-chain", "--signing-chain", ("push", "promote"), "path", mount="file"),
    Input("sign-keyless", "--sign-keyless", ("push", "promote"), "flag"),
    Input("verify-key", "--verify-key", ("latest", "pull"), "path", mount="file"),
    Input("verify-certificate-chain", "--verify-certificate-chain", ("latest", "pull"), "path", mount="file"),
    Input("verify-identity", "--verify-identity", ("latest", "pull")),
    Input("verify-issuer", "--verify-issuer", ("latest", "pull")),
    Input("verify-min-step", "--verify-min-step", ("latest", "pull")),
    Input("verify-require-provenance", "--verify-require-provenance", ("latest", "pull"), "flag"),
    Input("sigstore-trust-config", "--sigstore-trust-config", ("push", "promote", "latest", "pull"), "path",
          mount="file"),
    Input("timeout", "--timeout", HUB_MODES),
    Input("retries", "--retries", HUB_MODES),
)
# CLI options no workflow input maps to, and why.
NOT_INPUTS = {
    "--token": "the token input travels only as HF_TOKEN",
    "--json": "the action writes step outputs instead",
    "--dotenv": "for GitLab CI; the action writes step outputs",
    "--latest": "pull without subfolder, pointer or from-wandb pulls the latest",
    "--public": "the off side of the private input",
    "--distributed": "for a step run on every rank of a torchrun job; an action step is one process",
}


def env_name(name: str) -> str:
    """The environment variable action.yml sets for an input: ``local-dir`` -> ``INPUT_LOCAL_DIR``."""
    return "INPUT_" + name.upper().replace("-", "_")


def _truthy(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off", ""):
        return False
    raise InputError(f"input '{name}' must be true or false, got {value!r}")


def argv(env: Mapping[str, str] | None = None, cwd: str | None = None) -> list[str]:
    """The ckpt-action command line for the inputs in ``env``.

    >>> argv({"INPUT_MODE": "latest", "INPUT_REPO": "org/run", "INPUT_REQUIRE": "true"})
    ['latest', '--repo', 'org/run', '--require']
    >>> argv({"INPUT_MODE": "pull", "INPUT_REPO": "org/run", "INPUT_LOCAL_DIR": "/w/ckpt"})
    ['pull', '--repo', 'org/run', '--local-dir', '/w/ckpt', '--latest']
    """
    env = os.environ if env is None else env
    mode = env.get("INPUT_MODE", "").strip().lower()
    if mode not in MODES:
        raise InputError(f"input 'mode' must be one of {', '.join(MODES + SHELL_MODES)}; got"
                         f" {env.get('INPUT_MODE', '')!r}")
    base = _base(env, cwd)
    args = [mode]
    given: set[str] = set()
    for spec in INPUTS:
        value = env.get(env_name(spec.name), "")
        if mode not in spec.modes:
            continue
        if spec.kind in ("flag", "switch"):
            if value.strip() == "":
                continue
            on = _truthy(spec.name, value)
            if spec.kind == "flag" and not on:
                continue
            args.append(spec.option if on else str(spec.off))
        elif spec.kind == "lines":
            lines = [line.strip() for line in value.splitlines() if line.strip()]
            for line in lines:
                args += [spec.option, line]
            if not lines:
                continue
        else:
            if value == "":
                if mode in spec.required_in:
                    raise InputError(f"mode {mode} needs input '{spec.name}'")
                continue
            if spec.kind == "path":
                value = os.path.join(base, value)
            args += [spec.option, value]
        given.add(spec.name)
    if mode == "pull":
        if "repo" not in given and not given & {"pointer", "from-wandb"}:
            raise InputError("mode pull needs input 'repo' (or 'pointer' / 'from-wandb')")
        if not given & {"subfolder", "pointer", "from-wandb"}:
            args.append("--latest")  # no checkpoint named: the latest complete one
    return args


def _base(env: Mapping[str, str], cwd: str | None) -> str:
    """What a relative path input is relative to: the workspace, as the runner sees it."""
    return cwd or env.get("GITHUB_WORKSPACE") or os.getcwd()


def mounts(env: Mapping[str, str] | None = None, cwd: str | None = None) -> list[tuple[str, MountHow]]:
    """The host paths a container run of the action must see at the same path, as
    ``(path, how)``: the work dir, each path input outside it (as its ``mount`` says),
    and the step output and summary files. ``how``: ``mount``; ``create``, make the dir
    first; ``readonly``, one file, mounted read-only.

    The inputs are parsed first (the same :func:`argv`), and each path must be one a
    ``--volume`` can carry (no ':', not '/'). The command's own checks of its inputs run
    after this, before ``action/container.sh`` creates anything: ``from-action --check``.

    >>> mounts({"INPUT_MODE": "pull", "INPUT_REPO": "o/r", "INPUT_LOCAL_DIR": "/data/run/ckpt",
    ...         "INPUT_CACHE_DIR": "cache", "INPUT_VERIFY_KEY": "/tmp/keys/pub.pem"}, cwd="/w")
    [('/w', 'mount'), ('/data/run', 'create'), ('/tmp/keys/pub.pem', 'readonly')]
    >>> mounts({"INPUT_MODE": "push", "INPUT_REPO": "o/r", "INPUT_LOCAL_DIR": "/data/run/ckpt"}, cwd="/w")
    [('/w', 'mount'), ('/data/run', 'mount')]
    """
    env = os.environ if env is None else env
    args = argv(env, cwd)
    mode = args[0]
    work = os.path.abspath(cwd or os.getcwd())
    base = _base(env, cwd)
    out: list[tuple[str, MountHow]] = [(work, "mount")]
    for spec in INPUTS:
        value = env.get(env_name(spec.name), "")
        if spec.kind != "path" or not spec.mount or not value or mode not in spec.modes:
            continue
        path = os.path.abspath(os.path.join(base, value))
        if not path.isprintable():
            raise InputError(f"input '{spec.name}' has control or non-printing characters: give a plain path")
        if (path + "/").startswith(work.rstrip("/") + "/"):
            continue  # under the work dir, which is mounted whole
        parent = os.path.dirname(path)
        create = mode in spec.created_in
        mount: tuple[str, MountHow]
        if spec.mount == "parent":
            mount = (path if parent == "/" else parent, "create" if create else "mount")
        elif spec.mount == "dir":
            mount = (path, "create" if create else "mount")
        elif spec.mount == "file":
            mount = (path, "readonly")
        else:
            mount = (parent, "mount")
        out.append((_volume_path(mount[0], f"input '{spec.name}' {value!r}"), mount[1]))
    out += [(_volume_path(env[var], var), "mount") for var in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")
            if env.get(var)]
    return out


def _volume_path(path: str, given: str) -> str:
    """A host path a container's ``--volume PATH:PATH`` can carry as it is: ':' separates the
    fields of that option, a newline the lines of the listing, and '/' would hand the whole
    host to the container (it is what a local dir of '/', or one right under it, mounts)."""
    if path == "/":
        raise InputError(f"{given} would mount the host's root '/' into the container: give a path inside"
                         " a dedicated directory")
    if ":" in path or not path.isprintable():
        raise InputError(f"{given} holds ':' or a control character, which a container's --volume cannot"
                         " mount: use another path (or runtime: native)")
    return path
