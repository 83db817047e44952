"""The transformers Trainer under `ckpt-action watch -- python THIS OUT` (tests/e2e/test_watch_frameworks_e2e.py).

A tiny GPT-2 from a config trains 6 steps on the CPU and saves ``OUT/checkpoint-{2,4,6}``; the
process is killed (``os._exit(3)``) in the middle of its last save, after the model and the
optimizer and before the RNG state and ``trainer_state.json``. The libraries are imported in
``main`` so that collecting this file for doctests needs none of them.
"""

from __future__ import annotations

import os
import sys


def main(out: str) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    real = Trainer._save_rng_state

    def killed_in_the_last_save(self, output_dir):  # type: ignore[no-untyped-def]
        if self.state.global_step == 6:
            os._exit(3)
        return real(self, output_dir)

    Trainer._save_rng_state = killed_in_the_last_save  # type: ignore[method-assign]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(16)]
    args = TrainingArguments(output_dir=out, max_steps=6, save_steps=2, per_device_train_batch_size=4, use_cpu=True,
                             report_to="none", disable_tqdm=True, dataloader_num_workers=0, seed=0)
    Trainer(model=model, args=args, train_dataset=data).train()


if __name__ == "__main__":
    main(sys.argv[1])
