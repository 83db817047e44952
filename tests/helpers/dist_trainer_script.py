"""One process of a Trainer job on two simulated nodes (tests/e2e/test_distributed_trainer.py).

Each node has its own ``OUT_BASE/node<N>`` (no shared filesystem) and saves there with
``save_on_each_node=True``. ``MODE=train`` trains a tiny GPT-2 to step 4 (saves at 2 and
4); ``MODE=resume`` resumes from the Hub and trains to step 6. Each rank records what it
got in ``OUT_BASE/rank-R.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from ckpt_action.integrations.transformers import CheckpointCallback, resume_from_hub
from tests.helpers.dist_exit import exit_now


def main() -> int:
    base = Path(os.environ["OUT_BASE"])
    node = int(os.environ["GROUP_RANK"])
    output_dir = base / f"node{node}"
    resume = os.environ["MODE"] == "resume"
    args = TrainingArguments(output_dir=str(output_dir), max_steps=6 if resume else 4, save_steps=2,
                             per_device_train_batch_size=4, use_cpu=True, report_to="none", disable_tqdm=True,
                             ddp_backend="gloo", save_on_each_node=True, dataloader_num_workers=0, seed=0)
    args.world_size  # noqa: B018 - sets up the process group (accelerate), which resume_from_hub uses
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(16)]
    path = resume_from_hub(os.environ["REPO"], output_dir) if resume else None
    callback = CheckpointCallback(repo=os.environ["REPO"], log_to_wandb=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    trainer.train(resume_from_checkpoint=path)
    record = {"resumed_from": path, "global_step": trainer.state.global_step,
              "pushed": [[h.subfolder, h.revision] for h in callback.pushed]}
    (base / f"rank-{args.process_index}.json").write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    exit_now(main())
