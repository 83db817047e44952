"""The seed helper's ``find_latest_grpo_checkpoint``, re-implemented as the baseline.

Every file listed recursively (``list_repo_files``), the highest ``checkpoint-N`` picked
from the paths, then ``repo_info`` read for the head. No completeness check, and the
head is read after the listing, so it may not be the SHA the listing saw.

``python -m bench.seed_baseline REPO`` runs it as a process (HF_ENDPOINT from the env).
"""

from __future__ import annotations

import re
import sys

GRPO_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def find_latest(api: object, repo_id: str) -> tuple[str | None, str | None]:
    """(subfolder, revision) as the seed computed them."""
    from huggingface_hub import HfApi

    assert isinstance(api, HfApi)
    files = api.list_repo_files(repo_id, repo_type="model")
    best_step, best = -1, None
    for f in files:
        m = GRPO_CHECKPOINT_RE.match(f.split("/", 1)[0])
        if m and int(m.group(1)) > best_step:
            best_step, best = int(m.group(1)), f.split("/", 1)[0]
    if best is None:
        return None, None
    info = api.repo_info(repo_id, repo_type="model")
    return best, info.sha or "main"


def main(argv: list[str]) -> int:
    from huggingface_hub import HfApi

    subfolder, revision = find_latest(HfApi(), argv[0])
    print(f"{subfolder} {revision}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
