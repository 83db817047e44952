"""What latest read rides on the handle object it answered, to the pull of that handle, and
nowhere else: not in its equality or repr, not through pickle (a handle broadcast to other
ranks) or a deep copy, where the folder is read again."""

from __future__ import annotations

import copy
import pickle

from ckpt_action.handle import CheckpointHandle
from ckpt_action.ops.choose import carried as _carried
from ckpt_action.ops.choose import carry as _carry
from ckpt_action.ops.discover import Chosen, LatestResult

MANIFEST = b'{"marker": "what latest read"}'


def _found() -> LatestResult:
    handle = CheckpointHandle("o/r", "checkpoint-2", "a" * 40, 2, "http://127.0.0.1:9")
    return LatestResult(handle, "a" * 40, [], True, chosen=Chosen("a" * 40, "checkpoint-2", MANIFEST))


def test_the_handle_latest_answered_carries_it_to_a_pull() -> None:
    res = _carry(_found())
    assert res.handle is not None
    assert _carried(res.handle) is res
    plain = CheckpointHandle(**{k: getattr(res.handle, k) for k in ("repo", "subfolder", "revision", "step",
                                                                     "endpoint")})
    assert plain == res.handle and repr(plain) == repr(res.handle) and _carried(plain) is None


def test_a_pickled_or_deep_copied_handle_carries_nothing() -> None:
    res = _carry(_found())
    assert b"what latest read" not in pickle.dumps(res.handle)
    other = copy.deepcopy(res.handle)  # through the same reduction as pickle
    assert other == res.handle
    assert _carried(other) is None
