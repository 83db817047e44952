"""The option groups are defined once (ckpt_action.options) and every door follows them: each
field of Signing and Verification is a flag of the CLI's shared decorator, an input of the
action (in the modes the group serves) and a keyword of the module-level commands."""

from __future__ import annotations

import inspect
from dataclasses import fields

import click
import pytest

import ckpt_action as ckpt
from ckpt_action.ci.action_inputs import INPUTS
from ckpt_action.cli import options as cli_options
from ckpt_action.options import Signing, Verification

GROUPS = [(Signing, cli_options.signing_options, ("push", "promote"), (ckpt.push, ckpt.promote)),
          (Verification, cli_options.verify_options, ("latest", "pull"), (ckpt.latest, ckpt.pull))]


@pytest.mark.parametrize(("group", "decorator", "modes", "functions"), GROUPS, ids=["signing", "verification"])
def test_every_door_takes_every_field_of_the_group(group, decorator, modes, functions) -> None:
    names = [f.name for f in fields(group)]

    @click.command()
    @decorator
    def command(**kwargs: object) -> None:
        pass

    assert sorted(p.name for p in command.params) == sorted(names)
    rows = {row.name: row for row in INPUTS}
    for name in names:
        row = rows.get(name.replace("_", "-"))
        assert row is not None, f"no action input for {group.__name__}.{name}"
        assert set(modes) <= set(row.modes), (name, row.modes)
    for function in functions:
        assert set(names) <= set(inspect.signature(function).parameters), function.__name__


def test_a_group_is_built_from_the_keywords_and_answers_them() -> None:
    given = {"verify_key": "pub.pem", "verify_identity": "", "verify_min_step": 0}
    group = Verification.from_keywords(**given, unrelated="ignored")
    assert group.verify_key == "pub.pem" and group.verify_identity is None and group.verify_min_step == 0
    assert group.wanted and not Verification().wanted
    assert Verification(**group.keywords()) == group
