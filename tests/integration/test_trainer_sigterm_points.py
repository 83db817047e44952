"""SIGTERM at each point of the callback's life: the newest complete checkpoint lands on the Hub.

A real Trainer (a GPT-2 of one layer, CPU, a save every 2 steps) in a process of its own sends
itself SIGTERM at one point through an injected hook: inside ``on_save`` before the callback's
turn (the first save: before any push), while a save is staged (the second save, while the
first save's push is held at its commit by the local Hub), while it is handed to the queue,
while its push runs, between two saves, and before any save. Afterwards the newest complete
checkpoint is the Hub's latest, the log says it is durable at that very SHA, the process ended
by the signal, and the handler returned well inside the grace (a bound of a quarter of the
grace: a handler that waits for the pushes takes all of it).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import ckpt_action as ckpt
from ckpt_localhub import LocalHub, faultlayer
from tests.helpers.localhub_fixtures import REPO_ROOT, make_hub_env
from tests.integration.test_trainer_callback import REPO

GRACE = 60.0
TIMEOUT = 300

# point: (step the signal is sent at, the newest complete checkpoint then, or None)
POINTS = {
    "on_save_before_the_first_push": (2, "checkpoint-2"),
    "staging_the_first_save": (2, "checkpoint-2"),
    "staging_while_a_push_runs": (4, "checkpoint-4"),
    "submitting_while_a_push_runs": (4, "checkpoint-4"),
    "while_the_newest_push_runs": (2, "checkpoint-2"),
    "between_saves": (5, "checkpoint-4"),
    "before_any_save": (1, None),
}


def fire(on_main: bool = True) -> None:
    """The preemption notice, here and now: raise SIGTERM, and say how long the handler took."""
    print("SENDING-SIGTERM", flush=True)
    began = time.monotonic()
    signal.raise_signal(signal.SIGTERM)  # the Python handler runs on the main thread, before the next line
    if on_main:
        print(f"HANDLER-RETURNED {time.monotonic() - began:.3f}", flush=True)


class FireAt(TrainerCallback):
    """Before the CheckpointCallback in the list: at ``on_save`` of step ``at``, or at the end of step ``at``."""

    def __init__(self, hook: str, at: int) -> None:
        self.hook, self.at = hook, at

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        if self.hook == "on_save" and state.global_step == self.at:
            fire()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        if self.hook == "on_step_end" and state.global_step == self.at:
            fire()


def child_main(url: str, output_dir: str, point: str) -> None:
    """The training process: the hook for ``point`` in place, then train to step 20."""
    from ckpt_action.integrations import pushqueue
    from ckpt_action.integrations import transformers as integration
    from ckpt_action.integrations.transformers import CheckpointCallback
    from tests.integration.test_trainer_callback import make_trainer

    at, _ = POINTS[point]
    hooks: list[TrainerCallback] = []
    if point in ("on_save_before_the_first_push",):
        hooks.append(FireAt("on_save", at))
    elif point in ("between_saves", "before_any_save"):
        hooks.append(FireAt("on_step_end", at))
    elif point.startswith("staging"):
        real_stage = integration._stage

        def stage(src: Path, root: Path, *args: Any, **kwargs: Any) -> Path:
            if src.name == f"checkpoint-{at}":
                fire()  # in on_save, as the copy is being made
            return real_stage(src, root, *args, **kwargs)

        integration._stage = stage  # type: ignore[assignment]
    elif point.startswith("submitting"):
        real_submit = pushqueue.PushQueue.submit

        def submit(self: Any, item: Any) -> None:
            if getattr(item, "step", None) == at:
                fire()
            real_submit(self, item)

        pushqueue.PushQueue.submit = submit  # type: ignore[method-assign]
    elif point == "while_the_newest_push_runs":
        real_request = integration.ProcessUploader.submit

        def request(self: Any, req: dict[str, Any]) -> None:
            real_request(self, req)
            if req.get("step") == at:
                fire(on_main=False)  # from the pushing thread: Python runs the handler on the main thread

        integration.ProcessUploader.submit = request  # type: ignore[method-assign]
    callback = CheckpointCallback(repo=REPO, endpoint=url, sigterm_grace=GRACE)
    make_trainer(Path(output_dir), 20, [*hooks, callback]).train()
    print("TRAINING-ENDED", flush=True)  # never: the signal ends the process


def newest_complete(out: Path) -> str | None:
    """The newest checkpoint the Trainer finished writing (its trainer_state.json comes last)."""
    steps = [int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return f"checkpoint-{max(steps)}" if steps else None


@pytest.mark.process("the training process itself receives SIGTERM and must end by it")
@pytest.mark.parametrize("point", list(POINTS))
def test_sigterm_at_each_point_leaves_the_newest_complete_checkpoint_on_the_hub(
        point: str, tmp_path: Path, hf_client: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _at, newest = POINTS[point]
    sent = threading.Event()
    real = faultlayer.around

    def commits_held_until_the_signal(faults: Any, req: Any, route: Any) -> Any:
        if req.method == "POST" and "/commit/" in req.path:
            sent.wait(TIMEOUT)  # an earlier save's push is still running when the signal comes
        return real(faults, req, route)

    monkeypatch.setattr(faultlayer, "around", commits_held_until_the_signal)
    stderr_path = tmp_path / "stderr.txt"
    with LocalHub(tmp_path / "hub") as hub, open(stderr_path, "w") as stderr:
        env = make_hub_env(hub.url, tmp_path / "hf-home") | {"WANDB_MODE": "disabled"}
        env.pop("CKPT_PREEMPT_DEADLINE", None)
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.test_trainer_sigterm_points", hub.url,
                                 str(tmp_path / "out"), point], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
        stdout = ""
        watchdog = threading.Timer(TIMEOUT, proc.kill)  # a hung process ends the read below
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # to the end: the process ends by the signal (or is killed below)
                stdout += line
                if "SENDING-SIGTERM" in line:
                    sent.set()
            proc.wait(TIMEOUT)
        finally:
            watchdog.cancel()
            sent.set()
            if proc.poll() is None:
                proc.kill()
        log = stdout + stderr_path.read_text()
        assert "SENDING-SIGTERM" in stdout, log[-3000:]
        assert "TRAINING-ENDED" not in stdout, log[-3000:]
        assert proc.returncode == -signal.SIGTERM, log[-3000:]  # the default action, chained to
        found = ckpt.latest(REPO, endpoint=hub.url)
        if point == "while_the_newest_push_runs":
            # Raised on the pushing thread, the signal is handled once the main thread next
            # checks for it (CPython), maybe a few steps on: the newest save by then is the one.
            newest = newest_complete(tmp_path / "out") or newest
        if newest is None:
            assert found is None, log[-3000:]
        else:
            assert found is not None and found.subfolder == newest, log[-3000:]
            assert newest_complete(tmp_path / "out") == newest, log[-3000:]
        returned = re.search(r"HANDLER-RETURNED ([\d.]+)", stdout)
        if point != "while_the_newest_push_runs":
            assert returned is not None and float(returned.group(1)) < GRACE / 4, log[-3000:]
        assert re.search(r"SIGTERM: [\d.]+ s left until the deadline \(sigterm_grace\)", log), log[-3000:]
        if newest is None:
            assert "no checkpoint was saved yet" in log, log[-3000:]
        else:
            assert found is not None and f"{newest} durable at {found.revision}" in log, log[-3000:]


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], sys.argv[3])
