"""The trainer refuses run.precision=bf16 on hardware without bf16 before it writes anything, and runs
run.precision=auto as the value it resolves to, which config.yaml and the checkpoints record."""

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
    with pytest.raises(ConfigError, match=r"^run\.precision=bf16: [^\n]*set run\.precision=fp32 \(or auto: bf16 "
                                          r"only where it is native\)$"):
        with trainer_in_process(cfg):
            pass
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_runs_and_records_what_it_resolved_to(tmp_path, monkeypatch, native, expected):
    from testutil import trainer_in_process

    from ddppo.rundir import RunDir

    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: native)
    cfg = load_config("configs/gridnav.yaml", [f"run.dir={tmp_path / 'run'}", "env.num_envs=2",
                                               "rollout.num_steps=4", "ppo.num_mini_batch=1", "dist.device=cpu",
                                               "log.tensorboard=false", "run.precision=auto"])
    with trainer_in_process(cfg) as trainer:
        assert (trainer.cfg.run.precision, trainer.updater.precision, trainer.collector.actor.precision) == (
            expected, expected, expected)
    assert RunDir(tmp_path / "run").read_config().run.precision == expected
