"""`ddppo bench seeds` trains and evaluates each variant at each seed through the real CLI, and reports what the
runs' own files say (tiny budgets: the figures here mean nothing, their plumbing does)."""

import json

from ddppo.benchmarks.learning import seeds


def test_each_variant_and_seed_is_trained_evaluated_and_reported(tmp_path, capsys):
    out = tmp_path / "seeds.json"
    assert seeds.main(["gridnav", "env.num_envs=2", "rollout.num_steps=8", "policy.hidden_size=16",
                       "ppo.num_mini_batch=1", "--variant", "gru", "policy.rnn_type=gru", "--variant", "none",
                       "policy.rnn_type=none", "--seeds", "3", "--steps", "32", "--episodes", "2",
                       "--out", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["variant"], r["seed"]) for r in runs] == [("gru", 3), ("none", 3)]
    assert all(r["env_steps"] == 32 and 0.0 <= r["success"] <= 1.0 and r["fps"] > 0 for r in runs)
    printed = capsys.readouterr().out
    assert "gridnav, 32 env steps per run, seeds [3], eval 2 episodes" in printed
    assert printed.count("+-") == 1 + 2  # the header's, one per variant


def test_the_interval_is_a_t_interval_of_the_mean():
    mean, half = seeds.interval([0.8, 0.9, 1.0])
    assert abs(mean - 0.9) < 1e-12 and abs(half - 4.302652729749464 * 0.1 / 3 ** 0.5) < 1e-9  # t(0.975, 2)
    assert seeds.interval([0.5]) == (0.5, 0.0)
