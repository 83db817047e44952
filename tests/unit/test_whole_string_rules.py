"""Every name or id pattern matches whole strings: a value with a trailing newline (which
``$`` lets through) is refused wherever it is checked."""

from __future__ import annotations

import pytest

from ckpt_action import handle
from ckpt_action.errors import InputError
from ckpt_action.stores.hub import fetch
from ckpt_action.wandb import sdk


@pytest.mark.parametrize(("pattern", "good"), [
    (handle.SHA_RE, "a" * 40),
    (handle.SHA256_RE, "b" * 64),
    (handle.CHECKPOINT_RE, "checkpoint-12"),
    (fetch._ETAG_RE, '"' + "c" * 40 + '"'),
], ids=["sha", "sha256", "checkpoint", "etag"])
def test_anchored_patterns_refuse_a_trailing_newline(pattern, good):
    assert pattern.match(good)
    assert not pattern.match(good + "\n")


def test_w_and_b_refs_refuse_a_trailing_newline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    with pytest.raises(InputError, match="ENTITY/PROJECT/NAME:ALIAS"):
        sdk.fetch_pointer("team/proj/run--checkpoint:latest\n", timeout=1)
    with pytest.raises(InputError, match="ENTITY/PROJECT/NAME:ALIAS"):
        sdk.link_to_registry("team/proj/run--checkpoint:latest\n", "wandb-registry-model/run", project="proj")
    with pytest.raises(InputError, match="registry target"):
        sdk.link_to_registry("team/proj/run--checkpoint:latest", "wandb-registry-model/run\n", project="proj")
