"""The option groups are defined once (ckpt_action.options) and every door follows them: each
field of Signing and Verification is a flag of the CLI's shared decorator, an input of the
action (in the modes the group serves) and a keyword of the module-level commands (Retention:
of prune, and of the Trainer callback, which prunes after each push)."""

from __future__ import annotations

import inspect
from dataclasses import fields

import click
import pytest

import ckpt_action as ckpt
from ckpt_action.ci.action_inputs import INPUTS
from ckpt_action.cli import options as cli_options
from ckpt_action.options import Retention, Signing, Verification


def _callback_keywords() -> frozenset[str]:
    """The Trainer callback's constructor keywords, read from its source (no transformers here)."""
    import ast
    from pathlib import Path

    import ckpt_action

    source = Path(ckpt_action.__file__).parent / "integrations" / "transformers.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == "CheckpointCallback":
            init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
            return frozenset(a.arg for a in init.args.args + init.args.kwonlyargs)
    raise AssertionError("no CheckpointCallback")


GROUPS = [(Signing, cli_options.signing_options, ("push", "promote"), (ckpt.push, ckpt.promote)),
          (Verification, cli_options.verify_options, ("latest", "pull"), (ckpt.latest, ckpt.pull)),
          (Retention, cli_options.retention_options, ("prune",), (ckpt.prune, _callback_keywords()))]


@pytest.mark.parametrize(("group", "decorator", "modes", "functions"), GROUPS,
                         ids=["signing", "verification", "retention"])
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
        keywords = function if isinstance(function, frozenset) else set(inspect.signature(function).parameters)
        assert set(names) <= keywords, function


def test_a_group_is_built_from_the_keywords_and_answers_them() -> None:
    given = {"verify_key": "pub.pem", "verify_identity": "", "verify_min_step": 0}
    group = Verification.from_keywords(**given, unrelated="ignored")
    assert group.verify_key == "pub.pem" and group.verify_identity is None and group.verify_min_step == 0
    assert group.wanted and not Verification().wanted
    assert Verification(**group.keywords()) == group


def test_the_retention_group_is_what_the_client_prunes_by() -> None:
    assert Retention.from_keywords(keep_last=2, keep_best="", unrelated=1) == Retention(keep_last=2)
    assert Retention(keep_every=10).wanted and not Retention().wanted
    params = inspect.signature(ckpt.Client.prune).parameters
    assert list(params)[:3] == ["self", "repo", "keep_last"] and "retention" in params


def test_keep_last_given_twice_differently_is_refused_before_any_request() -> None:
    client = ckpt.Client(endpoint="http://127.0.0.1:9", token="hf_x")
    with pytest.raises(ckpt.InputError, match=r"keep_last=.* is given twice"):
        client.prune("o/r", 2, retention=Retention(keep_last=3, keep_every=10))
    with pytest.raises(ckpt.InputError, match="keep_last"):
        client.prune("o/r", retention=Retention())
