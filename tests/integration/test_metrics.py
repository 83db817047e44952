"""Metrics travel with each checkpoint, the best is chosen by them, retention beyond keep-last:
through the real CLI (in-process) and Python against a local Hub."""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_env, write_checkpoint


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url)


def hf(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def push(cli, env, tmp_path, step, *metrics, repo="o/r"):
    src = write_checkpoint(tmp_path / f"src-{step}", {"model.bin": bytes([step % 256]) * 64, "config.json": b"{}"})
    args = ["push", "--repo", repo, "--local-dir", str(src), "--step", str(step), "--json"]
    for m in metrics:
        args += ["--metric", m]
    run = cli(*args, env=env)
    assert run.code == 0, run.stderr
    return run.json


def commits(hub, repo="o/r"):
    return len(hf(hub).list_repo_commits(repo))


def test_push_records_metrics_and_list_shows_them(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 100, "eval_loss=0.5", "eval/acc=0.75")
    push(cli, env, tmp_path, 200)
    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["checkpoint-100"]["metrics"] == {"eval_loss": 0.5, "eval/acc": 0.75}
    assert rows["checkpoint-200"]["metrics"] is None
    text = cli("list", "--repo", "o/r", env=env)
    line = next(x for x in text.stdout.splitlines() if x.startswith("checkpoint-100"))
    assert "eval/acc=0.75" in line and "eval_loss=0.5" in line
    data = hf(hub).hf_hub_download("o/r", "checkpoint-100/ckpt-manifest.json", cache_dir=str(tmp_path / "dl"))
    assert json.loads(open(data).read())["metrics"] == {"eval/acc": 0.75, "eval_loss": 0.5}
    # the same files with other metrics: a new manifest, in a new commit
    again = push(cli, env, tmp_path, 100, "eval_loss=0.4")
    assert again["commits"] == 1


def test_bad_metrics_exit_2_before_anything_is_sent(hub, env, cli, tmp_path):
    before = len(list(hf(hub).list_models()))
    for bad, words in [("eval_loss=nan", ["--metric", "finite"]), ("eval loss=1", ["--metric", "whitespace"]),
                       ("eval_loss", ["--metric", "NAME=VALUE"]), ("a\x1bb=1", ["--metric", "control"])]:
        src = write_checkpoint(tmp_path / "bad", {"w.bin": b"w"})
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--metric", bad, env=env)
        assert run.code == 2, (bad, run.stderr)
        last = run.stderr.strip().splitlines()[-1]
        assert all(w in last for w in words), last
        assert "\x1b" not in run.stderr
    assert len(list(hf(hub).list_models())) == before, "nothing was created"


def _plant_manifest(hub, tmp_path, step, metrics_field):
    """A checkpoint-N whose manifest's metrics field was written by something else."""
    from huggingface_hub import CommitOperationAdd

    from ckpt_action.checkpoint.manifest import Manifest, digest_bytes

    data = b"w" * 10
    m = json.loads(Manifest(files={"w.bin": digest_bytes("w.bin", data)}, step=step).to_json())
    m["metrics"] = metrics_field
    hf(hub).create_commit("o/r", [CommitOperationAdd(f"checkpoint-{step}/w.bin", data),
                                  CommitOperationAdd(f"checkpoint-{step}/ckpt-manifest.json",
                                                     json.dumps(m).encode())], commit_message="planted")


def test_latest_best_chooses_by_the_metric_and_says_which(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 100, "eval_loss=0.9", "acc=0.1")
    push(cli, env, tmp_path, 200, "eval_loss=0.3")
    push(cli, env, tmp_path, 300, "eval_loss=0.3")
    push(cli, env, tmp_path, 400)  # no metric: never chosen
    run = cli("latest", "--repo", "o/r", "--best", "eval_loss:min", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-300", "a tie goes to the newest"
    assert run.json["best_metric"] == "eval_loss" and run.json["best_value"] == 0.3
    worst = cli("latest", "--repo", "o/r", "--best", "eval_loss:max", "--json", env=env)
    assert worst.json["subfolder"] == "checkpoint-100" and worst.json["best_value"] == 0.9
    plain = cli("latest", "--repo", "o/r", "--json", env=env)
    assert plain.json["subfolder"] == "checkpoint-400" and "best_metric" not in plain.json
    none = cli("latest", "--repo", "o/r", "--best", "bleu:max", "--json", env=env)
    assert none.code == 0 and none.json["found"] is False
    required = cli("latest", "--repo", "o/r", "--best", "bleu:max", "--require", env=env)
    assert required.code == 3
    bad = cli("latest", "--repo", "o/r", "--best", "eval_loss:lowest", env=env)
    assert bad.code == 2 and "--best" in bad.stderr.strip().splitlines()[-1]


def test_malformed_metrics_from_the_hub_are_reported_and_never_chosen(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 100, "eval_loss=0.9")
    _plant_manifest(hub, tmp_path, 200, {"eval_loss": "0.01"})
    _plant_manifest(hub, tmp_path, 300, {"eval_loss\n::warning::owned": 0.001, "eval_loss": 0.001})
    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["checkpoint-200"]["status"] == "complete" and rows["checkpoint-200"]["metrics"] is None
    assert "not a finite number" in rows["checkpoint-200"]["metrics_problem"]
    text = cli("list", "--repo", "o/r", env=env)
    assert text.code == 0 and "metrics unusable" in text.stdout
    assert not [line for line in (text.stdout + text.stderr).splitlines() if line.lstrip().startswith("::")]
    best = cli("latest", "--repo", "o/r", "--best", "eval_loss:min", "--json", env=env)
    assert best.code == 0 and best.json["subfolder"] == "checkpoint-100"
    assert "checkpoint-200" in best.stderr and "checkpoint-300" in best.stderr
    assert not [line for line in best.stderr.splitlines() if line.lstrip().startswith("::")]
    assert cli("latest", "--repo", "o/r", "--json", env=env).json["subfolder"] == "checkpoint-300", \
        "malformed metrics do not stop a resume from the folder"


def test_promote_best_with_a_tag(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 100, "eval_loss=0.9")
    chosen = push(cli, env, tmp_path, 200, "eval_loss=0.2")
    push(cli, env, tmp_path, 300, "eval_loss=0.5")
    run = cli("promote", "--repo", "o/r", "--best", "eval_loss:min", "--to", "release", "--tag", "v1", "--json",
              env=env)
    assert run.code == 0, run.stderr
    assert run.json["source_subfolder"] == "checkpoint-200" and run.json["source_revision"] != chosen["revision"]
    assert run.json["best_metric"] == "eval_loss" and run.json["best_value"] == 0.2 and run.json["tag"] == "v1"
    rows = {r["subfolder"]: r for r in cli("list", "--repo", "o/r", "--json", env=env).json["checkpoints"]}
    assert rows["release"]["metrics"] == {"eval_loss": 0.2}, "the promoted folder carries its metrics"
    both = cli("promote", "--repo", "o/r", "--best", "eval_loss:min", "--subfolder", "checkpoint-1", "--to", "r2",
               env=env)
    assert both.code == 2 and "--best" in both.stderr.strip().splitlines()[-1]
    none = cli("promote", "--repo", "o/r", "--best", "bleu:max", "--to", "r2", env=env)
    assert none.code == 3


def test_prune_keeps_the_union_and_says_why(hub, env, cli, tmp_path):
    for step, loss in [(100, "0.2"), (200, "0.9"), (300, None), (400, "0.8"), (500, "0.7"), (600, "0.6")]:
        push(cli, env, tmp_path, step, *([f"eval_loss={loss}"] if loss else []))
    dry = cli("prune", "--repo", "o/r", "--keep-last", "2", "--keep-every", "200", "--keep-best", "eval_loss:min",
              "--dry-run", "--json", env=env)
    assert dry.code == 0, dry.stderr
    assert sorted(dry.json["deleted"]) == ["checkpoint-300"]
    text = cli("prune", "--repo", "o/r", "--keep-last", "2", "--keep-every", "200", "--keep-best",
               "eval_loss:min", "--dry-run", env=env)
    lines = text.stderr.splitlines()
    assert "kept: checkpoint-100 (best 1 by eval_loss:min (0.2))" in lines
    assert "kept: checkpoint-600 (among the last 2; step a multiple of 200)" in lines
    assert "would delete: checkpoint-300" in lines
    why = {r["subfolder"]: r["reason"] for r in dry.json["kept_reasons"]}
    assert why["checkpoint-100"] == "best 1 by eval_loss:min (0.2)" and set(why) == set(dry.json["kept"])
    summary = tmp_path / "summary.md"
    cli("prune", "--repo", "o/r", "--keep-best", "eval_loss:min", "--keep-last", "1", "--dry-run",
        env=env | {"GITHUB_STEP_SUMMARY": str(summary)})
    assert "kept <code>checkpoint-100/</code>: best 1 by eval&#95;loss&#58;min &#40;0.2&#41;" in summary.read_text()
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--keep-best", "eval_loss:min:2", "--json", env=env)
    assert run.code == 0, run.stderr
    assert sorted(run.json["deleted"]) == ["checkpoint-200", "checkpoint-300", "checkpoint-400", "checkpoint-500"]
    assert sorted(run.json["kept"]) == ["checkpoint-100", "checkpoint-600"]


def test_keep_best_alone_never_prunes_a_checkpoint_without_the_metric(hub, env, cli, tmp_path):
    for step, loss in [(1, "0.2"), (2, None), (3, "0.9"), (4, "0.5")]:
        push(cli, env, tmp_path, step, *([f"eval_loss={loss}"] if loss else []))
    run = cli("prune", "--repo", "o/r", "--keep-best", "eval_loss:min", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["deleted"] == ["checkpoint-3"]


def test_keep_best_on_a_metric_no_checkpoint_has_is_exit_2_before_any_deletion(hub, env, cli, tmp_path):
    for step in (1, 2, 3):
        push(cli, env, tmp_path, step, "eval_loss=1")
    before = commits(hub)
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--keep-best", "bleu:max", env=env)
    assert run.code == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert "--keep-best" in last and "bleu" in last and "nothing was deleted" in last
    assert commits(hub) == before
    assert cli("prune", "--repo", "o/r", env=env).code == 2, "some rule is needed"


def test_a_tagged_or_promoted_checkpoint_is_never_pruned(hub, env, cli, tmp_path):
    for step, loss in [(1, "0.5"), (2, "0.9"), (3, "0.8"), (4, "0.7"), (5, "0.6")]:
        push(cli, env, tmp_path, step, f"eval_loss={loss}")
    assert cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", env=env).code == 0
    head = hf(hub).list_repo_commits("o/r")[0].commit_id
    hf(hub).create_tag("o/r", tag="keep-me", revision=head)  # the push-then-tag pattern: checkpoint-5 at head
    hf(hub).create_tag("o/r", tag="old", revision=hf(hub).list_repo_commits("o/r")[-2].commit_id)
    run = cli("prune", "--repo", "o/r", "--keep-best", "eval_loss:min", "--keep-last", "1", "--json", env=env)
    assert run.code == 0, run.stderr
    assert "checkpoint-2" in run.json["kept"], "the source of a promoted folder stays"
    assert "checkpoint-1" in run.json["kept"] and "checkpoint-5" in run.json["kept"]


def test_python_door(hub, tmp_path, monkeypatch):
    import ckpt_action as ckpt
    from ckpt_action.errors import InputError

    src = write_checkpoint(tmp_path / "p", {"w.bin": b"w"})
    h = ckpt.push(src, repo="o/py", step=5, metrics={"eval_loss": 0.25}, endpoint=hub.url)
    src2 = write_checkpoint(tmp_path / "p2", {"w.bin": b"x"})
    ckpt.push(src2, repo="o/py", step=6, metrics={"eval_loss": 0.5}, endpoint=hub.url)
    found = ckpt.latest("o/py", best="eval_loss:min", endpoint=hub.url)
    assert found is not None and found.subfolder == h.subfolder == "checkpoint-5"
    assert ckpt.list_checkpoints("o/py", endpoint=hub.url)[1].metrics == {"eval_loss": 0.25}
    with pytest.raises(InputError) as err:
        ckpt.push(src, repo="o/py", step=7, metrics={"eval_loss": float("inf")}, endpoint=hub.url)
    assert "metrics=" in str(err.value)
    with pytest.raises(InputError) as err:
        ckpt.prune("o/py", 1, keep_best="eval_loss", endpoint=hub.url)
    assert str(err.value).startswith("keep_best='eval_loss' must be METRIC:min|max[:K]")
    # keep_last is prune's positional contract; keep-best alone is the Retention group's, through the client
    plan = ckpt.prune("o/py", 1, keep_best="eval_loss:min", dry_run=True, endpoint=hub.url)
    assert plan.deleted == [] and "best 1 by eval_loss:min" in plan.kept["checkpoint-5"]
    alone = ckpt.Client(endpoint=hub.url).prune("o/py", retention=ckpt.Retention(keep_best="eval_loss:max"))
    assert alone.deleted == ["checkpoint-5"]


@pytest.mark.parametrize(("inputs", "words"), [
    ({"mode": "push", "step": "1", "metrics": "eval_loss=0.5\neval_loss=nan"}, ["input 'metrics'", "finite"]),
    ({"mode": "latest", "best": "eval_loss"}, ["input 'best'", "METRIC:min|max"]),
    ({"mode": "prune", "keep-best": "eval_loss:min:0"}, ["input 'keep-best'", "K must be"]),
    ({"mode": "prune", "keep-every": "0"}, ["input 'keep-every'", "at least 1"]),
    ({"mode": "prune"}, ["input 'keep-last'", "input 'keep-every'", "input 'keep-best'"]),
])
def test_the_action_names_its_inputs(inputs, words, cli, tmp_path):
    src = write_checkpoint(tmp_path / "a", {"w.bin": b"w"})
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", INPUT_REPO="o/r", INPUT_LOCAL_DIR=str(src))
    env.update({"INPUT_" + k.upper().replace("-", "_"): v for k, v in inputs.items()})
    run = cli("from-action", env=env)
    assert run.code == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), last


def test_the_action_records_metrics_lines_and_writes_the_best_outputs(hub, cli, tmp_path):
    from tests.helpers.gha import parse_github_output

    src = write_checkpoint(tmp_path / "a", {"w.bin": b"w"})
    out = tmp_path / "out"
    base = clean_env(tmp_path, HF_ENDPOINT=hub.url, INPUT_REPO="o/r", GITHUB_OUTPUT=str(out))
    push_env = base | {"INPUT_MODE": "push", "INPUT_STEP": "3", "INPUT_LOCAL_DIR": str(src),
                       "INPUT_METRICS": "eval_loss = 0.5\n\n acc=2 \n"}
    assert cli("from-action", env=push_env).code == 0
    run = cli("from-action", env=base | {"INPUT_MODE": "latest", "INPUT_BEST": "acc:max"})
    assert run.code == 0, run.stderr
    outputs = parse_github_output(out)
    assert outputs["best-metric"] == "acc" and outputs["best-value"] == "2.0" and outputs["subfolder"] == "checkpoint-3"


def test_a_checkpoint_latest_best_returned_still_pulls_after_a_prune_deletes_it(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 1, "eval_loss=0.9")
    push(cli, env, tmp_path, 2, "eval_loss=0.1")
    push(cli, env, tmp_path, 3, "eval_loss=0.5")
    chosen = cli("latest", "--repo", "o/r", "--best", "eval_loss:min", "--json", env=env).json
    assert chosen["subfolder"] == "checkpoint-2"
    # a prune that does not keep it (planned without knowing the job's choice) deletes it from the head
    pruned = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=env)
    assert "checkpoint-2" in pruned.json["deleted"]
    run = cli("pull", "--repo", "o/r", "--subfolder", chosen["subfolder"], "--revision", chosen["revision"],
              "--local-dir", str(tmp_path / "job"), "--json", env=env)
    assert run.code == 0, run.stderr
    assert (tmp_path / "job" / "model.bin").read_bytes() == bytes([2]) * 64


def test_keep_best_with_free_storage_frees_only_what_it_prunes(hub, env, cli, tmp_path):
    big = 3_000_000  # LFS
    for step, loss in [(1, "0.1"), (2, "0.9"), (3, "0.8")]:
        src = write_checkpoint(tmp_path / f"b{step}", {"model.safetensors": bytes([step]) * big})
        assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), "--metric",
                   f"eval_loss={loss}", env=env).code == 0
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--keep-best", "eval_loss:min", "--free-storage",
              "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["deleted"] == ["checkpoint-2"] and run.json["freed_bytes"] >= big
    best = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "best"), env=env)
    assert best.code == 0, best.stderr
    assert (tmp_path / "best" / "model.safetensors").read_bytes() == bytes([1]) * big


def test_a_prune_planned_before_latest_best_returned_leaves_its_pin_pullable(hub, env, cli, tmp_path):
    """The release guide's answer: the prune is planned (its commit about to be sent) before
    latest --best answers; it deletes the chosen folder from the head, never from the SHA the
    job holds."""
    from tests.helpers.chaos_helpers import env_for
    from tests.helpers.commit_proxy import COMMIT, CommitProxy

    for step, loss in [(1, "0.9"), (2, "0.1"), (3, "0.5")]:
        push(cli, env, tmp_path, step, f"eval_loss={loss}")
    chosen = {}
    with CommitProxy(hub.url) as proxy:
        proxy.before("POST", COMMIT, lambda: chosen.update(
            cli("latest", "--repo", "o/r", "--best", "eval_loss:min", "--json", env=env).json))
        pruned = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=env_for(proxy, tmp_path))
        statuses = [c.status for c in proxy.commits()]
    assert pruned.code == 0 and statuses == [200], pruned.stderr
    assert chosen["subfolder"] == "checkpoint-2" and "checkpoint-2" in pruned.json["deleted"]
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-2", "--revision", chosen["revision"],
              "--local-dir", str(tmp_path / "job"), "--json", env=env)
    assert run.code == 0, run.stderr
    assert (tmp_path / "job" / "model.bin").read_bytes() == bytes([2]) * 64
