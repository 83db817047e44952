"""Benchmarks of ckpt-action against the seed helper and the ``hf`` CLI, on the local Hub.

``python -m bench [--quick] [--out DIR] [--only N,...]`` prints a table, writes JSON and,
for a full run, ``BENCHMARKS.md``. Claims are ratios measured side by side in one run,
because the machines this runs on are noisy; ``--quick`` asserts only what is
deterministic (request counts, commits, bytes uploaded) and never timings.
"""
