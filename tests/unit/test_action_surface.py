"""The action's surface against its one source: inputs, outputs and settings, both ways.

action.yml is a copy that must exist (GitHub reads it); these tests hold it to
ckpt_action.ci.action_inputs (inputs -> CLI arguments), ckpt_action.ci.outputs (declared
outputs) and ckpt_action.settings (what the container runtime forwards).
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from ckpt_action.ci import action_inputs
from ckpt_action.ci.action_inputs import INPUTS, MODES, NOT_INPUTS, SHELL_INPUTS, argv, env_name
from ckpt_action.ci.outputs import OUTPUTS, step_outputs
from ckpt_action.cli import app as cli
from ckpt_action.errors import InputError
from ckpt_action.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def test_every_action_input_is_consumed_and_every_table_input_exists() -> None:
    table = {i.name for i in INPUTS}
    assert set(ACTION["inputs"]) == table | set(SHELL_INPUTS)
    assert not table & set(SHELL_INPUTS)
    env = ACTION["runs"]["steps"][-1]["env"]
    for name in ACTION["inputs"]:
        assert env[env_name(name)] == f"${{{{ inputs.{name} }}}}", name


def test_every_cli_option_a_workflow_needs_is_reachable_from_an_input() -> None:
    for mode in MODES:
        command = cli.cli.commands[mode]
        options = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts + p.secondary_opts}
        reachable = {i.option for i in INPUTS if mode in i.modes} | {
            i.off for i in INPUTS if mode in i.modes and i.off}
        missing = options - reachable - set(NOT_INPUTS) - {"-h", "--help"}
        assert not missing, f"{mode}: no input reaches {sorted(missing)}"
        unknown = reachable - options
        assert not unknown, f"{mode}: inputs map to options the command lacks: {sorted(unknown)}"


def test_action_outputs_are_exactly_the_declared_ones() -> None:
    declared = ACTION["outputs"]
    assert set(declared) == set(OUTPUTS)
    for name, spec in declared.items():
        assert spec["description"] == OUTPUTS[name], name
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}", name


def test_an_undeclared_output_is_a_bug_not_a_silent_drop() -> None:
    with pytest.raises(AssertionError, match="not declared"):
        step_outputs({"repo": "o/r", "brand_new_key": 1})


def test_container_runtime_forwards_every_setting() -> None:
    script = (ROOT / "action" / "container.sh").read_text()
    prefixes = re.search(r"grep -E '\^\(([A-Z_|]+)\)'", script)
    assert prefixes, "container.sh forwards variables by prefix"
    forwarded = tuple(prefixes.group(1).split("|"))
    from ckpt_action.disk.cache import CacheConfig

    for _field, env, _default, _doc in [*Settings.knobs(), *CacheConfig.knobs()]:
        assert env.startswith(forwarded), f"{env} is not forwarded into the container"
    for spec in INPUTS:
        assert env_name(spec.name).startswith(forwarded)
    # Paths the CLI reads or writes are mounted into the container, as the table says: the
    # list the CLI prints for container.sh (from-action --print-mounts) covers every path input.
    from ckpt_action.ci.action_inputs import mounts

    assert "from-action --print-mounts" in script
    for spec in INPUTS:
        if spec.kind == "path":
            assert spec.mount, f"{spec.name} says nothing about how the container sees it"
            mode = spec.modes[0]
            env = {"INPUT_MODE": mode, "INPUT_REPO": "o/r", "INPUT_LOCAL_DIR": "/work/ckpt", "INPUT_TO": "release",
                   "INPUT_KEEP_LAST": "1", env_name(spec.name): "/elsewhere/x/y"}
            mounted = [path for path, _create in mounts(env, "/ws")]
            assert any("/elsewhere/x/y".startswith(p) for p in mounted), f"{spec.name} is not mounted: {mounted}"


@pytest.mark.parametrize(("env", "expected"), [
    ({"INPUT_MODE": "push", "INPUT_REPO": "o/r", "INPUT_LOCAL_DIR": "ckpt", "INPUT_STEP": "5",
      "INPUT_PRIVATE": "false", "INPUT_WANDB_FATAL": "true", "INPUT_REVISION": "ignored-for-push"},
     ["push", "--repo", "o/r", "--step", "5", "--local-dir", "/w/ckpt", "--public", "--wandb-fatal"]),
    ({"INPUT_MODE": "latest", "INPUT_REPO": "o/r", "INPUT_REVISION": "v1", "INPUT_REQUIRE": "false"},
     ["latest", "--repo", "o/r", "--revision", "v1"]),
    ({"INPUT_MODE": "list", "INPUT_REPO": "o/r", "INPUT_REVISION": "a" * 40},
     ["list", "--repo", "o/r", "--revision", "a" * 40]),
    ({"INPUT_MODE": "pull", "INPUT_LOCAL_DIR": "/abs/d", "INPUT_POINTER": "p/checkpoint.json"},
     ["pull", "--local-dir", "/abs/d", "--pointer", "/w/p/checkpoint.json"]),
    ({"INPUT_MODE": "pull", "INPUT_LOCAL_DIR": "d", "INPUT_FROM_WANDB": "e/p/n:latest"},
     ["pull", "--local-dir", "/w/d", "--from-wandb", "e/p/n:latest"]),
    ({"INPUT_MODE": "pull", "INPUT_REPO": "o/r", "INPUT_SUBFOLDER": "release", "INPUT_LOCAL_DIR": "d",
      "INPUT_VERIFY_KEY": "k.pub", "INPUT_VERIFY_MIN_STEP": "1000", "INPUT_VERIFY_REQUIRE_PROVENANCE": "true"},
     ["pull", "--repo", "o/r", "--subfolder", "release", "--local-dir", "/w/d", "--verify-key", "/w/k.pub",
      "--verify-min-step", "1000", "--verify-require-provenance"]),
    ({"INPUT_MODE": "PROMOTE", "INPUT_REPO": "o/r", "INPUT_SUBFOLDER": "checkpoint-1", "INPUT_TO": "release",
      "INPUT_TAG": "v1"},
     ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release", "--tag", "v1"]),
    ({"INPUT_MODE": "prune", "INPUT_REPO": "o/r", "INPUT_KEEP_LAST": "2", "INPUT_DRY_RUN": "yes",
      "INPUT_TIMEOUT": "5", "INPUT_RETRIES": "1"},
     ["prune", "--repo", "o/r", "--keep-last", "2", "--dry-run", "--timeout", "5", "--retries", "1"]),
])
def test_inputs_become_the_command_line(env: dict[str, str], expected: list[str]) -> None:
    assert argv(env, cwd="/w") == expected


@pytest.mark.parametrize(("env", "words"), [
    ({"INPUT_MODE": "upload"}, "input 'mode' must be one of"),
    ({"INPUT_MODE": "push", "INPUT_REPO": "o/r"}, "needs input 'local-dir'"),
    ({"INPUT_MODE": "latest"}, "needs input 'repo'"),
    ({"INPUT_MODE": "pull", "INPUT_LOCAL_DIR": "d"}, "needs input 'repo'"),
    ({"INPUT_MODE": "promote", "INPUT_REPO": "o/r", "INPUT_SUBFOLDER": "s"}, "needs input 'to'"),
    ({"INPUT_MODE": "latest", "INPUT_REPO": "o/r", "INPUT_REQUIRE": "maybe"}, "'require' must be true or false"),
])
def test_bad_inputs_say_which_input(env: dict[str, str], words: str) -> None:
    with pytest.raises(InputError, match=re.escape(words)):
        action_inputs.argv(env, cwd="/w")
