"""Every validation pattern matches whole strings: ``^...$`` with ``.match`` accepts a
trailing newline ("$" matches before a final "\\n"), so each pattern is anchored with
``\\A...\\Z`` and fed a valid value plus "\\n" here, whichever of match, fullmatch or search
the code uses it with."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import ckpt_action
from ckpt_action import names
from ckpt_action.disk import target
from ckpt_action.errors import InputError
from ckpt_action.handle import CHECKPOINT_RE, SHA256_RE, SHA_RE, CheckpointHandle
from ckpt_action.stores.hub import fetch
from ckpt_action.wandb import sdk as pointer

SHA = "a" * 40
# (pattern, a value it must accept)
VALIDATORS = [
    (names.WANDB_ARTIFACT_RE, "org--run--checkpoint"),
    (names.WANDB_REF_RE, "entity/project/name:latest"),
    (names.WANDB_REGISTRY_RE, "wandb-registry-model/llama"),
    (names.WANDB_NAME_RE, "llama-sft"),
    (SHA256_RE, "b" * 64),
    (target._staging_re(Path("/x/dest")), ".dest.ckpt-abcd_123"),
    (fetch._ETAG_RE, '"' + "d" * 64 + '"'),
    (names._REPO_RE, "org/run"),
    (names._SEGMENT_RE, "checkpoint-7"),
    (names._REF_RE, "main"),
    (SHA_RE, SHA),
    (CHECKPOINT_RE, "checkpoint-7"),
]


@pytest.mark.parametrize(("pattern", "good"), VALIDATORS, ids=[p.pattern[:40] for p, _ in VALIDATORS])
def test_each_validation_pattern_refuses_a_trailing_newline(pattern, good):
    assert pattern.fullmatch(good) and pattern.match(good)
    for use in (pattern.match, pattern.fullmatch, pattern.search):
        assert use(good + "\n") is None, f"{pattern.pattern!r}.{use.__name__} accepts a trailing newline"


def test_no_pattern_in_the_package_anchors_with_a_bare_dollar():
    """A pattern anchored with "$" is the bug the table guards; this finds new ones."""
    found = []
    for info in pkgutil.walk_packages(ckpt_action.__path__, "ckpt_action."):
        if info.name.startswith(("ckpt_localhub", "ckpt_action.integrations")):
            continue
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str) and \
                    re.search(r"(?<!\\)\$|(?<![\\\[])\^", value.pattern):
                found.append(f"{info.name}.{attr}: {value.pattern!r}")
    assert not found, found


def test_the_wandb_inputs_refuse_a_trailing_newline():
    handle = CheckpointHandle("org/run", "checkpoint-1", SHA, 1)
    with pytest.raises(InputError):
        pointer._pointer(handle, "run-pointer\n", None)
    with pytest.raises(InputError):
        pointer.fetch_pointer("entity/project/name:latest\n", timeout=1)
    with pytest.raises(InputError):
        pointer.link_to_registry("entity/project/name:latest", "wandb-registry-model/llama\n", project="p")
    assert target.is_ours(Path("/x/dest"), ".dest.ckpt-abcd_123")
    assert not target.is_ours(Path("/x/dest"), ".dest.ckpt-abcd_123\n")
