"""A non-finite observation is caught at the environment boundary.

Decision: an environment that returns NaN or inf in an observation is broken (a simulator fault, a
division by zero in a sensor), so the rank that sees it stops with one clear `environment error` naming
the env, the observation key and the step, exit code 2, instead of acting on it: a NaN observation
makes the policy's logits NaN, `torch.multinomial` raises, and a multiplicative recurrent reset would
keep that env's state NaN for ever. (Non-finite rewards are different: they are data, and make a
counted skipped update; see test_nonfinite.py.) The fault is injected with the synthetic env's
`nan_obs_at_step`.
"""

from __future__ import annotations

from pathlib import Path

from rel_util import EMPTY_CONFIG, describe, run_cli, synthetic_overrides


def test_nan_observation_is_one_clear_error_not_a_multinomial_traceback(tmp_path: Path):
    run = tmp_path / "run"
    res = run_cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        run, **{"env.synthetic.nan_obs_at_step": 11, "run.total_env_steps": 4 * 8 * 4}))
    assert res.returncode == 2, describe(res)
    assert "Traceback" not in res.stderr and "multinomial" not in res.stderr, describe(res)
    err = [line for line in res.stderr.splitlines() if line.startswith("ddppo: environment error")]
    assert len(err) == 1, describe(res)
    assert "env.name=synthetic" in err[0] and "observation 'obs'" in err[0] and "env 0" in err[0], err[0]
    assert "(nan)" in err[0] and "after step 3 of update 2" in err[0], err[0]  # batched step 11 = 8 + 3
