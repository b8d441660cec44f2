"""rollout.mode=variable through the real CLI: a run stopped after two updates resumes mid-run, its
environments continue their saved episodes with the steps that were in flight stored first, and the
run ends at its step budget."""

import json

from ddppo.config import load_config

GRIDNAV = "configs/gridnav.yaml"
VARIABLE = ["env.name=synthetic", "env.num_envs=4", "env.num_workers=4", "rollout.num_steps=8", "ppo.epochs=1",
            "ppo.num_mini_batch=2", "policy.hidden_size=16", "rollout.mode=variable", "log.tensorboard=false",
            "checkpoint.interval_updates=1", "env.synthetic.step_sleep_s=0.002", "env.synthetic.step_sleep_sigma=1.0"]


def test_variable_mode_resumes_mid_run(tmp_path, cli, caplog):
    from testutil import trainer_in_process

    run = tmp_path / "run"
    res = cli("train", GRIDNAV, f"run.dir={run}", *VARIABLE, "run.total_env_steps=64")
    assert res.returncode == 0, res
    cfg = load_config(GRIDNAV, [f"run.dir={run}", *VARIABLE, "run.total_env_steps=128"])
    with trainer_in_process(cfg) as trainer:
        assert (trainer.progress.update, trainer.progress.env_steps) == (2, 64)
        assert "fresh episodes" not in caplog.text and "does not fit" not in caplog.text, caplog.text
        unstored = trainer.collector.unstored  # the saved steps that were in flight
        pending = trainer.collector.pending["action"].clone()
        assert trainer.train() == 0
        assert (trainer.progress.update, trainer.progress.env_steps) == (4, 128)
    assert all(w.result.obs["obs"].shape == (w.hi - w.lo, 8) for w in unstored)
    assert pending.shape == (4,)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    assert all(r["perf/rollout_env_steps_min"] <= 8 <= r["perf/rollout_env_steps_max"] for r in rows)
