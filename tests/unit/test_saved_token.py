"""A token saved by `hf auth login` is the token when HF_TOKEN is unset, as in huggingface_hub."""

from __future__ import annotations

from pathlib import Path

from ckpt_action import names
from ckpt_action.settings import Settings


def test_the_saved_token_is_used_when_hf_token_is_unset(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("hf_saved_by_login\n")
    settings = Settings.from_env({"HF_HOME": str(tmp_path)})
    assert settings.token == "hf_saved_by_login"
    names.token_for_write(settings.token, "https://huggingface.co")  # a push is not refused for want of a token
    assert Settings.from_env({"HF_HOME": str(tmp_path), "HF_TOKEN": "hf_env"}).token == "hf_env"
    assert Settings.from_env({"HF_HOME": str(tmp_path)}, token="hf_given").token == "hf_given"
    (tmp_path / "elsewhere").write_text("hf_at_token_path")
    assert Settings.from_env({"HF_TOKEN_PATH": str(tmp_path / "elsewhere")}).token == "hf_at_token_path"
    assert Settings.from_env({"HF_HOME": str(tmp_path / "none")}).token is None
    assert "hf_saved_by_login" not in repr(settings)
