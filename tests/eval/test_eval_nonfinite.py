"""A non-finite episode metric in evaluation (issue 33, item 1): counted and reported, never a crash.

`env.synthetic.nan_reward_at_step=2` makes some episodes' return NaN. Before the fix `ddppo eval` kept the NaN
in the per-episode list and `json.dumps(..., allow_nan=False)` raised ("Out of range float values are not JSON
compliant: nan"), exit 1, nothing written.
"""

from __future__ import annotations

import json
import math

SYNTHETIC = ["tests/distributed/empty.yaml", "env.name=synthetic", "env.num_envs=2", "rollout.num_steps=8",
             "ppo.num_mini_batch=1", "policy.hidden_size=16", "dist.device=cpu", "log.tensorboard=false",
             "run.torch_threads=1"]


def test_nan_episode_metrics_are_counted_and_the_json_stays_strict(cli, tmp_path):
    run_dir = tmp_path / "run"
    res = cli("train", *SYNTHETIC, f"run.dir={run_dir}", "run.total_env_steps=32")
    assert res.returncode == 0, res
    res = cli("eval", str(run_dir), "env.synthetic.nan_reward_at_step=2", "eval.num_episodes=4", "log.tensorboard=true")
    assert res.returncode == 0, res
    text = (run_dir / "eval" / "ckpt-2.json").read_text()
    result = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(f"{c} in the JSON")))
    returns = [e["metrics"]["return"] for e in result["episodes"]]
    bad = sum(r is None for r in returns)
    assert 0 < bad < len(returns), returns  # some episodes saw the NaN reward, some did not
    assert result["non_finite"] == {"reward": bad}
    reward = result["metrics"]["reward"]
    assert reward["count"] == len(returns) - bad and reward["non_finite"] == bad and math.isfinite(reward["mean"])
    assert result["metrics"]["episode_length"]["non_finite"] == 0
    assert f"reward is not a finite number in {bad} of {len(returns)} episodes" in res.stderr
    assert f"non-finite values left out: reward in {bad} episode(s)" in res.stdout
    assert list((run_dir / "eval" / "tb").iterdir())  # TensorBoard took the counts too
    again = cli("eval", str(run_dir), "env.synthetic.nan_reward_at_step=2", "eval.num_episodes=4")
    assert again.returncode == 0 and "(already evaluated)" in again.stdout, again  # the stored result reads back


def test_a_metric_no_episode_reports_finitely_is_counted_not_summarised():
    from ddppo.eval.stats import finite_or_none, non_finite_counts, summarize_episodes

    eps = [{"metrics": finite_or_none({"return": math.nan, "length": 3.0, "spl": math.inf})},
           {"metrics": finite_or_none({"return": -math.inf, "length": 5.0, "spl": 0.5})}]
    assert eps[0]["metrics"] == {"return": None, "length": 3.0, "spl": None}
    out = summarize_episodes(eps)
    assert "reward" not in out and out["spl"]["count"] == 1 and out["spl"]["non_finite"] == 1
    assert non_finite_counts(eps) == {"reward": 2, "spl": 1}
    json.dumps({"m": out, "e": eps}, allow_nan=False)  # strict JSON holds all of it
