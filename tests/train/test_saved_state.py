"""Saved state comes in symmetric pairs: what `state_dict` gives, `load_state_dict` takes back unchanged."""

import numpy as np
import torch

from ddppo import checkpoint as ckpt


def test_trainer_counters_round_trip(tmp_path, tiny_config):
    from ddppo.distributed import init_distributed
    from ddppo.train.trainer import Trainer

    cfg = tiny_config(tmp_path, **{"log.tensorboard": "false"})
    ctx = init_distributed("gloo", "cpu", 60, 60, 0)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            counters = {"update": 7, "env_steps": 896, "skipped_in_a_row": 1, "kl_beta": 0.0,
                        "window": [[np.ones(7), np.full(7, 2.0), 128, 0.5]]}
            trainer.load_state_dict(counters, {"grpo_carry": torch.ones(2, 4)})
            again = trainer.state_dict()
            assert {k: v for k, v in again.items() if k != "window"} == {k: v for k, v in counters.items()
                                                                           if k != "window"}
            assert np.array_equal(again["window"][0][0], np.ones(7)) and again["window"][0][2:] == [128, 0.5]
            assert torch.equal(trainer.rank_state_dict()["grpo_carry"], torch.ones(2, 4))
            # a checkpoint from before skipped_in_a_row / window / kl_beta were saved
            trainer.load_state_dict({"update": 3, "env_steps": 384})
            assert trainer.state_dict()["skipped_in_a_row"] == 0 and trainer.state_dict()["window"] == []
        finally:
            trainer.close()
    finally:
        ctx.close()


def test_payload_says_what_a_checkpoint_holds(tmp_path):
    data = ckpt.payload({"w": torch.zeros(1)}, {"state": {}}, {"update": 1, "env_steps": 2}, "run: {}\n",
                        [{"rng": 0}, {"rng": 1}])
    assert data["world_size"] == 2 and set(data) == {"model", "optimizer", "counters", "config_yaml", "world_size",
                                                     "rank_states"}
    assert ckpt.counters_of(data) == {"update": 1, "env_steps": 2, **ckpt.COUNTER_DEFAULTS}
