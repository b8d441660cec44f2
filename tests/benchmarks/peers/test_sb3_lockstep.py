"""ddppo's continuous-control PPO is stable-baselines3's, step for step: from the same weights, env seed and random
streams (`ddppo bench sb3-lockstep`), two updates on Pendulum-v1 (time-limit truncations, so the bootstrap too)
give the same actions, scaled rewards, values, log-probabilities, advantages, returns and weights to float
rounding, with normalize.update=step against SB3's own VecNormalize and with normalize.update=rollout against
VecNormalize frozen per rollout. A difference in any piece of the algorithm (normalisation order, reward scaling,
GAE, the truncation bootstrap, the loss, clipping, Adam) shows as a difference of order 1e-2 or more."""

from __future__ import annotations

import pytest

from testutil import unavailable

TOLERANCE = 1e-4  # float rounding over two updates stays below 1e-6 here


@pytest.mark.parametrize("mode", ["step", "rollout"])
def test_ddppo_and_sb3_take_the_same_steps(tmp_path, mode):
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        unavailable("DDPPO_REQUIRE_SB3", "stable-baselines3 is not installed", "pip install -e '.[bench]'")
    from ddppo.benchmarks.peers.sb3_lockstep import lockstep

    rows = lockstep("Pendulum-v1", "cleanrl", 1, 2, mode, tmp_path / "run", n_steps=512)
    assert len(rows) == 2 and "weights" in rows[1]
    for update, row in enumerate(rows, 1):
        off = {k: v for k, v in row.items() if not v <= TOLERANCE}
        assert not off, f"update {update}: ddppo and SB3 differ by {off}"
