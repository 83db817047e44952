"""The job ckpt-chaos sends SIGTERM to: the callback's figure of issue 46 (not a bench section).

A seeded Trainer (a GPT-2 of one layer, CPU), 40 steps, ``save_steps=8``, with
``CheckpointCallback`` pushing to a local Hub, and ``resume_from_hub`` at start. With
``--wipe`` (the resume command) the output dir is emptied first, as on a new machine after a
preemption, so the resume can only come from the Hub. Each ``{out}`` gets a repo of its own.
The job's stderr is kept beside ``{out}`` (``train-<pid>.log``): ckpt-chaos keeps only the
resume's output, and the flush's lines (``checkpoint-N durable at SHA``, the seconds from
the signal to the end of the flush) are the crash run's.

Run (ckpt-chaos 0.1.8: ``pip install --no-deps ckpt-chaos==0.1.8``), with a local Hub up::

    ckpt-action local-hub --port 8765 --data /tmp/chaos-hub &
    HF_ENDPOINT=http://127.0.0.1:8765 HF_TOKEN=hf_local ckpt-chaos run --modes term --grace 30 \\
        --checkpoint-glob '{out}/checkpoint-*' --ckpt-ignore-size --step-regex 'resumed from step (\\d+)' \\
        --fail-on HARD_FAIL,LOST_WORK --timeout 300 --work /tmp/chaos-work \\
        --resume-cmd 'python -m bench.chaos_trainer {out} --wipe' -- python -m bench.chaos_trainer {out}
    python -m bench.chaos_trainer --figure /tmp/chaos-work
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

STEPS = 40
SAVE_STEPS = 8


class _Tee:
    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)
            s.flush()
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()

    def isatty(self) -> bool:
        return False


def train(out: Path, wipe: bool) -> None:
    log = open(out.parent / f"train-{os.getpid()}.log", "a", encoding="utf-8")  # kept open until the process ends
    sys.stderr = _Tee(sys.stderr, log)  # type: ignore[assignment]
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from ckpt_action.integrations.transformers import CheckpointCallback, resume_from_hub

    if wipe:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    repo = "chaos/run-" + hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12]
    path = resume_from_hub(repo, out)
    step = int(re.search(r"(\d+)$", path).group(1)) if path else 0  # type: ignore[union-attr]
    print(f"resumed from step {step}", flush=True)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(32)]
    args = TrainingArguments(output_dir=str(out), max_steps=STEPS, save_steps=SAVE_STEPS,
                             per_device_train_batch_size=4, use_cpu=True, report_to="none", disable_tqdm=True,
                             logging_steps=8, dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[CheckpointCallback(repo=repo)])
    trainer.train(resume_from_checkpoint=path)


def figure(work: Path) -> dict[str, Any]:
    """Points tried, checkpoints lost, the longest time from the signal to the end of the flush."""
    points = sorted(p for p in work.glob("pt_*") if p.name != "pt_control")
    lost, longest, rows = 0, 0.0, []
    for p in points:
        result = json.loads((p / "result.json").read_text()) if (p / "result.json").exists() else {}
        outcome = result.get("outcome", {})
        newest, resumed = outcome.get("newest_complete_step") or 0, outcome.get("resumed_from_step") or 0
        gap = max(0, (newest - resumed) // SAVE_STEPS)
        lost += gap
        text = "".join(f.read_text(errors="replace") for f in p.glob("train-*.log"))
        took = [float(t) for t in re.findall(r"the flush ended ([\d.]+) s after the signal", text)]
        longest = max([longest, *took])
        rows.append({"point": result.get("label"), "newest_complete": newest, "resumed": resumed,
                     "flush_s": took, "error": outcome.get("raised")})
    return {"points": len(points), "checkpoints_lost": lost, "longest_signal_to_durable_s": longest, "rows": rows}


if __name__ == "__main__":
    if sys.argv[1] == "--figure":
        print(json.dumps(figure(Path(sys.argv[2])), indent=1))
    else:
        train(Path(sys.argv[1]), "--wipe" in sys.argv[2:])
