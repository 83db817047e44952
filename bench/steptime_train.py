"""The training of section 13, one process: a GPT-2 from a config trained on CPU by the real
Trainer for a fixed number of steps, saving every K steps; its step times and the moment each
save completed go to a JSON file.

``python bench/steptime_train.py OUT RESULT STEPS EVERY EMBD LAYERS MODE SEED [REPO]``; MODE is
``none`` (no pushes; also the run under ``ckpt-action watch``) or ``callback``
(``CheckpointCallback``, which also stamps each push as it lands). SEED differs from run to run,
so no run's checkpoint bytes are already on the Hub (its LFS store is content-addressed).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


def _run_queue_ns() -> int | None:
    """Nanoseconds this thread has spent runnable but waiting for a core (Linux schedstat)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Clock(TrainerCallback):
    """Each step's wall time, split into the training thread's own CPU time, its wait for a
    core (other processes on the machine, the pushes' processes), and the rest: blocked in
    this process (the GIL, a lock, a synchronous wait), which the callback must not cause."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.cpu: list[float] = []
        self.waiting: list[float] = []
        self.saves: dict[str, float] = {}
        self._began = self._cpu = 0.0
        self._queued: int | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._queued = _run_queue_ns()
        self._cpu = time.thread_time()
        self._began = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.append(time.perf_counter() - self._began)
        self.cpu.append(time.thread_time() - self._cpu)
        queued = _run_queue_ns()
        if queued is not None and self._queued is not None:
            self.waiting.append((queued - self._queued) / 1e9)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.saves[f"checkpoint-{state.global_step}"] = time.time()


def main(out: str, result: str, steps: int, every: int, embd: int, layers: int, mode: str, seed: int,
         repo: str = "") -> None:
    torch.manual_seed(seed)
    # As many threads as cores: the training keeps every core busy, as a real one does, so
    # an uploader that takes a core from it shows in the step time.
    torch.set_num_threads(os.cpu_count() or 1)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_head=4, n_embd=embd, vocab_size=2048, n_positions=32))
    data = [{"input_ids": torch.randint(0, 2048, (32,)), "labels": torch.randint(0, 2048, (32,))}
            for _ in range(steps * 2)]
    args = TrainingArguments(output_dir=out, max_steps=steps, save_steps=every, per_device_train_batch_size=2,
                             use_cpu=True, report_to="none", disable_tqdm=True, logging_steps=10**6,
                             dataloader_num_workers=0, seed=seed, save_only_model=False)
    clock = Clock()
    callbacks: list[TrainerCallback] = [clock]
    landed: dict[str, float] = {}
    if mode == "callback":
        from ckpt_action.integrations.transformers import CheckpointCallback

        class Stamped(CheckpointCallback):
            def _push(self, job: Any, distributed: bool = False) -> Any:
                handle = super()._push(job, distributed)
                landed[handle.subfolder] = time.time()
                return handle

        callbacks.insert(0, Stamped(repo=repo, push_every_save=True))
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    size = sum(p.stat().st_size for p in (Path(out) / f"checkpoint-{every}").rglob("*") if p.is_file())
    Path(result).write_text(json.dumps({"steps": clock.steps, "cpu": clock.cpu, "waiting": clock.waiting,
                                        "saves": clock.saves, "landed": landed,
                                        "train_seconds": wall, "checkpoint_bytes": size}))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6], int(a[7]), *(a[8:9]))
