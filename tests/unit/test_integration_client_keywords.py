"""``Watcher`` and ``CheckpointCallback`` take ``client=`` (a :class:`~ckpt_action.client.Client`)
and ``retention=`` (a :class:`~ckpt_action.options.Retention`) beside the loose keywords they
stand for: each does what its keyword says, and giving both is one line naming them."""

from __future__ import annotations

import pytest

from ckpt_action.client import Client
from ckpt_action.errors import InputError, render
from ckpt_action.options import Retention
from ckpt_action.watch.watcher import Watcher

CLIENT = Client("http://127.0.0.1:9", "hf_client_token", timeout=7.0, retries=3)
WANTED = {"endpoint": "http://127.0.0.1:9", "token": "hf_client_token", "timeout": 7.0, "retries": 3, "auth": None}


def test_a_watch_uploads_through_the_client_it_is_given(tmp_path) -> None:
    assert Watcher(tmp_path, "org/run", client=CLIENT).hub == WANTED


def test_a_watch_keeps_by_the_retention_it_is_given(tmp_path) -> None:
    watch = Watcher(tmp_path, "org/run", retention=Retention(keep_last=2, keep_best="eval_loss:min"))
    assert watch.retention == Retention(keep_last=2, keep_best="eval_loss:min") and watch.keep_last == 2


def test_the_loose_keywords_still_work(tmp_path) -> None:
    watch = Watcher(tmp_path, "org/run", endpoint="http://127.0.0.1:9", token="t", keep_last=1)
    assert watch.hub == {"endpoint": "http://127.0.0.1:9", "token": "t", "timeout": None, "retries": None}
    assert watch.retention == Retention(keep_last=1)


@pytest.mark.parametrize(("keywords", "names"), [
    ({"client": CLIENT, "endpoint": "http://127.0.0.1:9", "token": "t"}, ("client=", "endpoint=", "token=")),
    ({"retention": Retention(keep_last=2), "keep_every": 5}, ("retention=", "keep_every=")),
])
def test_a_watch_given_both_says_so_in_one_line(tmp_path, keywords, names) -> None:
    with pytest.raises(InputError) as caught:
        Watcher(tmp_path, "org/run", **keywords)
    line = render(str(caught.value), "api")
    assert "\n" not in line and all(name in line for name in names) and "hf_client_token" not in line


def test_a_callback_uploads_through_the_client_and_keeps_by_the_retention_it_is_given() -> None:
    pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
    from ckpt_action.integrations.transformers import CheckpointCallback

    cb = CheckpointCallback("org/run", client=CLIENT, retention=Retention(keep_every=5))
    assert cb._hub == WANTED and cb._client.connection == CLIENT.connection
    assert cb._retention == Retention(keep_every=5)
    with pytest.raises(InputError, match="retries="):
        CheckpointCallback("org/run", client=CLIENT, retries=2)
    with pytest.raises(InputError, match="keep_last="):
        CheckpointCallback("org/run", retention=Retention(keep_every=5), keep_last=1)
