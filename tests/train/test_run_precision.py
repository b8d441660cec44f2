"""The trainer refuses run.precision=bf16 on hardware without bf16 before it writes anything."""

from __future__ import annotations

import pytest

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.model import precision


def test_bf16_without_hardware_support_stops_the_run_before_anything_is_written(tmp_path, monkeypatch):
    from testutil import trainer_in_process

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    cfg = load_config("configs/gridnav.yaml", [f"run.dir={tmp_path / 'run'}", "env.num_envs=2",
                                               "rollout.num_steps=4", "ppo.num_mini_batch=1", "dist.device=cpu",
                                               "log.tensorboard=false", "run.precision=bf16"])
    with pytest.raises(ConfigError, match=r"^run\.precision=bf16: .*set run\.precision=fp32$"):
        with trainer_in_process(cfg):
            pass
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
