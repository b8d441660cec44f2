"""End to end through the real `python -m ddppo` process: config errors, a tiny training run,
resume (counters, metrics.jsonl, TensorBoard continue without duplicates), config changes."""

import json
import math
import re

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ddppo import checkpoint as ckpt
from ddppo.config import from_yaml_text, load_config

GRIDNAV = "configs/gridnav.yaml"
STEPS_PER_UPDATE = 4 * 32  # env.num_envs x rollout.num_steps of the `tiny` overrides


def assert_one_user_error(res, *needles):
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ddppo:")]
    assert len(errors) == 1, res
    for needle in needles:
        assert needle in res.stderr, f"{needle!r} missing:\n{res}"


# --------------------------------------------------------------------------------- config errors
def test_config_errors_exit_2_one_message_nothing_written(tmp_path, cli_many):
    bad_yaml = tmp_path / "broken.yaml"
    bad_yaml.write_text("run:\n  seed: [1, 2\nppo: {\n")
    binary = tmp_path / "model.yaml"
    binary.write_bytes(bytes(range(256)) * 8)
    run_dir = tmp_path / "run"
    cases = [  # (config file, overrides, strings the message names)
        (GRIDNAV, ["ppo.bogus=1"], ["ppo.bogus"]),                                  # unknown key
        (GRIDNAV, ["ppo.lr=fast"], ["ppo.lr", "fast"]),                             # wrong type
        (GRIDNAV, ["ppo.clip=-0.5"], ["ppo.clip=-0.5"]),                            # out of range
        (GRIDNAV, ["ppo.num_mini_batch=3"], ["ppo.num_mini_batch=3", "env.num_envs=32"]),
        (str(tmp_path / "missing.yaml"), [], ["missing.yaml", "does not exist"]),  # missing file
        (str(bad_yaml), [], ["broken.yaml", "not valid YAML"]),                    # not YAML
        (str(binary), [], ["model.yaml"]),                                         # not text at all
        (GRIDNAV, ["env.name=gridworld"], ["env.name", "gridworld"]),              # unknown env name
    ]
    # `train` for every case (it must also write nothing); `config` once (the same loader; every case
    # runs through `config` in-process in tests/config/test_config.py)
    invocations = [["train", cfg, f"run.dir={run_dir}", *overrides] for cfg, overrides, _ in cases]
    config_cases = [cases[0]]
    invocations += [["config", cfg, *overrides] for cfg, overrides, _ in config_cases]
    results = cli_many(invocations + [["config", GRIDNAV, "ppo.lr=0.01", "env.num_envs=8"]])
    for (_, _, needles), res in zip(cases + config_cases, results):
        assert_one_user_error(res, *needles)
        assert res.stdout == ""
    ok = results[-1]  # and a valid one prints the whole resolved config
    assert ok.returncode == 0, ok
    assert from_yaml_text(ok.stdout, "stdout") == load_config(GRIDNAV, ["ppo.lr=0.01", "env.num_envs=8"])
    assert not run_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "model.yaml"]


def test_unknown_gym_env_creates_no_run_dir(tmp_path, cli, tiny):
    run_dir = tmp_path / "run"
    res = cli("train", GRIDNAV, *tiny(run_dir), "env.name=gym:NoSuchEnv-v9", "ppo.num_mini_batch=1")
    assert_one_user_error(res, "NoSuchEnv-v9")
    assert not run_dir.exists()


# ------------------------------------------------------------------------ train, resume, change
def read_metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def tb_steps(run_dir, tag):
    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def checkpoint_names(run_dir):
    return [p.name for p in ckpt.list_checkpoints(run_dir)]


def assert_consecutive(rows, last_update):
    assert [r["update"] for r in rows] == list(range(1, last_update + 1))
    assert [r["env_steps"] for r in rows] == [u * STEPS_PER_UPDATE for u in range(1, last_update + 1)]
    walls = [r["wall_time"] for r in rows]
    assert walls == sorted(walls)


def test_train_resume_and_config_changes(tmp_path, cli, tiny):
    run = tmp_path / "run"
    base = tiny(run, **{"checkpoint.interval_updates": 2, "checkpoint.keep_last": 2})

    # 1. a tiny run: 4 updates of 128 env steps
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=512")
    assert res.returncode == 0, res
    assert "Traceback" not in res.stderr
    assert sorted(p.name for p in run.iterdir()) == [".lock", "checkpoints", "config.yaml", "metrics.jsonl", "tb"]
    stored = from_yaml_text((run / "config.yaml").read_text(), "config.yaml")
    assert stored == load_config(GRIDNAV, [*base, "run.total_env_steps=512"])  # the resolved config
    rows = read_metrics(run)
    assert_consecutive(rows, 4)
    for r in rows:
        assert {"update", "env_steps", "wall_time", "fps"} <= r.keys()
        for key in ("perf/fps", "loss/policy", "loss/value", "loss/entropy", "loss/approx_kl",
                    "loss/clip_fraction", "loss/explained_variance", "loss/grad_norm", "perf/env_step_s",
                    "perf/policy_forward_s", "perf/learn_forward_backward_s", "preempt/straggler_wait_s_max",
                    "train/episodes"):
            assert key in r, key
        # what this config can never move is not written (one rank: no preemption; no KL reference, no reward
        # model, no overlapped learning)
        for key in ("preempt/steps_fraction_min", "preempt/num_preempted", "perf/rollout_env_steps_mean",
                    "loss/kl_ref", "perf/reference_forward_s", "perf/reward_model_s", "perf/learner_wait_s_max"):
            assert key not in r, key
        assert r["fps"] > 0 and math.isfinite(r["loss/policy"]) and r["loss/entropy"] > 0
    # episodes end early with a random policy (STOP is one of 4 actions), so train/* appears at once
    assert {"train/reward", "train/episode_length", "train/success", "train/spl"} <= rows[0].keys()
    assert checkpoint_names(run) == ["ckpt-2.pt", "ckpt-4.pt"]
    assert tb_steps(run, "loss/policy") == [r["env_steps"] for r in rows]
    assert re.search(r"steps 512/512 .*fps .*eta", res.stderr)  # the console progress line

    # 2. a larger budget resumes from ckpt-4: counters, metrics and TensorBoard continue
    first_rows = rows
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=1024")
    assert res.returncode == 0, res
    assert "resumed from" in res.stderr and "ckpt-4.pt" in res.stderr
    rows = read_metrics(run)
    assert_consecutive(rows, 8)
    assert rows[:4] == first_rows  # what was there stays untouched
    assert checkpoint_names(run) == ["ckpt-6.pt", "ckpt-8.pt"]
    second_rows = rows
    counters = ckpt.load(run / "checkpoints" / "ckpt-8.pt")["counters"]
    assert (counters["update"], counters["env_steps"]) == (8, 8 * STEPS_PER_UPDATE)
    assert tb_steps(run, "loss/policy") == [r["env_steps"] for r in rows]

    # 3. a crash left a truncated newest checkpoint and metrics past the last good one:
    #    resume skips it with a warning, redoes updates 7-8 once, and continues
    newest = run / "checkpoints" / "ckpt-8.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"update": 9, "env_steps": 11')  # torn line from the crash
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=1280")
    assert res.returncode == 0, res
    assert "skipping checkpoint" in res.stderr and "ckpt-8.pt" in res.stderr
    assert "ckpt-6.pt" in res.stderr
    rows = read_metrics(run)
    assert_consecutive(rows, 10)
    assert rows[:6] == second_rows[:6]
    steps = tb_steps(run, "loss/policy")
    assert steps == [r["env_steps"] for r in rows]  # no duplicated update in TensorBoard either
    assert checkpoint_names(run) == ["ckpt-8.pt", "ckpt-10.pt"]
    ckpt.load(run / "checkpoints" / "ckpt-8.pt")  # the truncated one was replaced by a good one

    # 4. a shape-changing key is refused, naming it, and nothing in the run dir changes
    snapshot = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=1280", "policy.hidden_size=64")
    assert_one_user_error(res, "policy.hidden_size", "32", "64")
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == snapshot

    # 5. a non-shape key (ppo.lr) may change: training continues, the old config is kept beside
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=1536", "ppo.lr=0.0003")
    assert res.returncode == 0, res
    assert from_yaml_text((run / "config.yaml").read_text(), "config.yaml").ppo.lr == 0.0003
    kept = [from_yaml_text(p.read_text(), p.name) for p in run.glob("config.*.yaml")]
    assert sorted(c.run.total_env_steps for c in kept) == [512, 1024, 1280]  # one per changed run
    assert {c.ppo.lr for c in kept} == {load_config(GRIDNAV).ppo.lr}
    assert_consecutive(read_metrics(run), 12)

    # 6. the same command again: the run is finished, nothing is added
    before = (run / "metrics.jsonl").read_text()
    res = cli("train", GRIDNAV, *base, "run.total_env_steps=1536", "ppo.lr=0.0003")
    assert res.returncode == 0, res
    assert "already finished" in res.stderr
    assert (run / "metrics.jsonl").read_text() == before
    assert checkpoint_names(run) == ["ckpt-10.pt", "ckpt-12.pt"]


def test_checkpoint_path_that_is_not_a_checkpoint(tmp_path, cli, tiny):
    bogus = tmp_path / "weights.pt"
    bogus.write_text("not a checkpoint")
    run = tmp_path / "run"
    res = cli("train", GRIDNAV, *tiny(run), f"checkpoint.path={bogus}")
    assert_one_user_error(res, "weights.pt", "checkpoint")
    assert not (run / "checkpoints").exists()
