"""Every mode's written outputs agree with their descriptions: the type each description
states (SHA, whole number, boolean, JSON array), the modes it names, and nothing written as
``None``/``null`` or ``True``/``False``, in step outputs, dotenv and JSON alike."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ckpt_action.ci.action_inputs import MODES
from ckpt_action.ci.outputs import KINDS, OUTPUTS
from tests.conftest import clean_env, write_checkpoint
from tests.helpers.gha import parse_github_output

SHA = re.compile(r"[0-9a-f]{40}")
MODE_PREFIX = re.compile(r"^((?:`[a-z]+`(?:, | or )?)+):")


def described_modes(name: str) -> set[str] | None:
    """The modes a description opens with (``push``, ``promote``: ...), None when it names none."""
    m = MODE_PREFIX.match(OUTPUTS[name])
    found = set(re.findall(r"`([a-z]+)`", m.group(1))) if m else set()
    return found & set(MODES) or None


def test_every_output_declares_a_kind_its_description_states() -> None:
    assert set(KINDS) == set(OUTPUTS)
    words = {"sha": "SHA", "bool": "`true`", "json-array": "JSON array"}
    for name, kind in KINDS.items():
        assert kind in ("sha", "int", "bool", "json-array", "text", "number"), name
        if kind in words:
            assert words[kind] in OUTPUTS[name], f"{name}: its description does not say it is a {kind}"


def check(mode: str, outputs: dict[str, str], as_json: dict[str, object], dotenv: dict[str, str]) -> None:
    assert outputs, mode
    assert {n.replace("-", "_") for n in outputs} == set(as_json), mode
    for name, text in outputs.items():
        assert name in OUTPUTS, name
        assert dotenv[f"CKPT_{name.upper().replace('-', '_')}"] == text, name
        modes = described_modes(name)
        assert modes is None or mode in modes, f"{mode} wrote {name}, whose description is for {modes}"
        assert text not in ("None", "null", "True", "False"), (mode, name, text)
        value = as_json[name.replace("-", "_")]
        assert value is not None, (mode, name)
        kind = KINDS[name]
        if kind == "sha":
            assert SHA.fullmatch(text), (mode, name, text)
        elif kind == "int":
            assert re.fullmatch(r"0|[1-9][0-9]*", text) and isinstance(value, int), (mode, name, text)
        elif kind == "bool":
            assert text in ("true", "false") and isinstance(value, bool), (mode, name, text)
        elif kind == "json-array":
            assert isinstance(json.loads(text), list) and isinstance(value, list), (mode, name, text)
        elif kind == "number":
            assert math.isfinite(float(text)) and isinstance(value, (int, float)), (mode, name, text)
            assert not isinstance(value, bool) and float(text) == value, (mode, name, text)


@pytest.fixture
def run_mode(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    seen: dict[str, dict[str, str]] = {}

    def run(label: str, *args: str, code: int = 0) -> dict[str, str]:
        out, dotenv = tmp_path / f"{label}.out", tmp_path / f"{label}.env"
        env = clean_env(tmp_path, HF_ENDPOINT=hub.url, GITHUB_OUTPUT=str(out))
        res = cli(*args, "--json", "--dotenv", str(dotenv), env=env)
        assert res.code == code, res.stderr
        outputs = parse_github_output(out)
        lines = dict(line.split("=", 1) for line in dotenv.read_text().splitlines())
        check(args[0], outputs, res.json, lines)
        seen[label] = outputs
        return outputs

    return run


def test_each_mode_writes_only_its_outputs_each_of_its_described_type(run_mode, tmp_path: Path) -> None:
    for step in (1, 2, 3):
        src = write_checkpoint(tmp_path / f"c{step}", {"model.bin": bytes([step]) * 100, "config.json": b"{}"})
        pushed = run_mode(f"push{step}", "push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step),
                          "--metric", f"eval_loss={1 / step}")
    assert "found" not in pushed and "step" in pushed
    found = run_mode("latest", "latest", "--repo", "o/r")
    assert found["found"] == "true" and found["verified"] == "true"
    best = run_mode("best", "latest", "--repo", "o/r", "--best", "eval_loss:max")
    assert best["subfolder"] == "checkpoint-1" and best["best-metric"] == "eval_loss" and best["best-value"] == "1.0"
    missing = run_mode("missing", "latest", "--repo", "o/nothing-here")
    assert missing["found"] == "false" and "step" not in missing and "verified" not in missing
    run_mode("pull", "pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "pulled"))
    run_mode("promote", "promote", "--repo", "o/r", "--subfolder", "checkpoint-3", "--to", "release", "--tag", "v1")
    by_best = run_mode("promote-best", "promote", "--repo", "o/r", "--best", "eval_loss:min", "--to", "best")
    assert by_best["source-subfolder"] == "checkpoint-3" and by_best["best-value"] == str(1 / 3)
    listed = run_mode("list", "list", "--repo", "o/r")
    assert int(listed["count"]) == len(json.loads(listed["checkpoints"]))
    dry = run_mode("dry", "prune", "--repo", "o/r", "--keep-last", "1", "--dry-run")
    assert dry["dry-run"] == "true" and dry["deleted-count"] == "2" and dry["revision"] == listed["revision"]
    pruned = run_mode("prune", "prune", "--repo", "o/r", "--keep-last", "1")
    assert pruned["dry-run"] == "false" and pruned["deleted-count"] == "2"
    # The prune's revision is the commit it made, not the one it read.
    assert pruned["revision"] != listed["revision"]
    after = run_mode("list-after", "list", "--repo", "o/r")
    assert after["revision"] == pruned["revision"]
