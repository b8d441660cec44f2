"""run.precision: the one autocast context of the policy's forwards, the hardware check, fp32 outputs."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from ddppo.config import PolicyConfig
from ddppo.errors import ConfigError
from ddppo.model import precision
from ddppo.model.policy import Policy
from ddppo.config import load_config
from ddppo.model.precision import (autocast, bf16_problem, capabilities_have_bf16, resolve_precision, to_fp32,
                                   with_resolved_precision)


def test_fp32_runs_as_built_and_bf16_autocasts_on_the_device_type():
    with autocast("fp32", torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with autocast("bf16", torch.device("cpu")):
        assert torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


def test_to_fp32_casts_floats_and_keeps_integer_actions():
    logp, action = to_fp32(torch.zeros(3, dtype=torch.bfloat16), torch.zeros(3, dtype=torch.long))
    assert (logp.dtype, action.dtype) == (torch.float32, torch.long)


@pytest.mark.parametrize("capabilities, expected", [
    ({"architecture": "x86_64", "avx512_f": True, "avx512_bf16": True}, True),
    ({"architecture": "x86_64", "avx512_bf16": False, "amx_bf16": True}, True),
    ({"architecture": "arm64", "neon": True, "bf16": True}, True),
    ({"architecture": "x86_64", "avx2": True, "avx512_f": True, "avx512_bf16": False}, False),
    ({"architecture": "arm64", "neon": True}, False),
])
def test_torchs_cpu_capabilities_decide_native_bf16(capabilities, expected):
    assert capabilities_have_bf16(capabilities) is expected


def test_this_cpu_is_asked_through_torchs_capability_report(monkeypatch):
    precision.cpu_has_bf16.cache_clear()
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"architecture": "x86_64", "amx_bf16": True},
                        raising=False)
    try:
        assert precision.cpu_has_bf16() is True
    finally:
        precision.cpu_has_bf16.cache_clear()


def test_a_cpu_without_bf16_is_refused_in_one_line_naming_the_key_and_fix(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError) as err:
        resolve_precision("bf16", torch.device("cpu"))
    msg = str(err.value)
    assert msg.startswith("run.precision=bf16: ") and "set run.precision=fp32" in msg and "\n" not in msg
    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"  # fp32 runs anywhere
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_is_bf16_where_the_cpu_computes_it_natively_and_fp32_elsewhere(monkeypatch, caplog, native, expected):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: native)
    with caplog.at_level("INFO", logger="ddppo.model.precision"):
        assert resolve_precision("auto", torch.device("cpu")) == expected
    assert [r.getMessage() for r in caplog.records if "run.precision=auto" in r.getMessage()] == [
        f"run.precision=auto: {expected} on cpu ({'it computes bf16 natively' if native else 'no native bf16'})"]
    caplog.clear()
    resolve_precision("auto", torch.device("cpu"), announce=False)  # other ranks: nothing logged
    assert not caplog.records


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cuda_asks_torch_cuda_without_emulation(monkeypatch, native, expected):
    asked = []

    def supported(including_emulation=True):
        asked.append(including_emulation)
        return native

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    assert resolve_precision("auto", torch.device("cuda", 0)) == expected
    assert asked == [False]


def test_the_resolved_value_replaces_auto_in_the_config_and_anything_else_is_refused(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    cfg = load_config("configs/gridnav.yaml", ["run.precision=auto"])
    resolved = with_resolved_precision(cfg, torch.device("cpu"))
    assert (cfg.run.precision, resolved.run.precision) == ("auto", "bf16")
    assert resolved.run.seed == cfg.run.seed and resolved.env == cfg.env
    fp32 = load_config("configs/gridnav.yaml", ["run.precision=fp32"])
    assert with_resolved_precision(fp32, torch.device("cpu")) is fp32
    with pytest.raises(ConfigError, match=r"^run\.precision='fp16': use one of fp32, bf16, auto$"):
        resolve_precision("fp16", torch.device("cpu"))


def test_a_gpu_without_bf16_is_named(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    msg = bf16_problem(torch.device("cuda", 0))
    assert msg is not None and "Tesla V100" in msg and "run.precision=fp32" in msg
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert bf16_problem(torch.device("cuda", 0)) is None


def test_bf16_forward_outputs_leave_in_fp32_and_the_weights_stay_fp32():
    from ddppo.rollout.acting import Actor

    space = gymnasium.spaces.Dict({"img": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                                   "vec": gymnasium.spaces.Box(-1, 1, (3,), np.float32)})
    policy = Policy(space, gymnasium.spaces.Discrete(3), PolicyConfig(rnn_type="gru", hidden_size=16))

    class Envs:  # what Actor reads of a vector env
        num_envs, action_space = 4, gymnasium.spaces.Discrete(3)

    actor = Actor(Envs(), policy, torch.device("cpu"), precision="bf16")
    obs = {"img": torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8), "vec": torch.rand(4, 3)}
    memory, start = policy.initial_memory(4), torch.ones(4)
    action, logp, value, new_memory = actor.forward(obs, memory, start)
    assert (logp.dtype, value.dtype) == (torch.float32,) * 2
    assert {k: v.dtype for k, v in new_memory.items()} == {k: v.dtype for k, v in memory.items()}  # as stored
    assert actor.value(obs, memory, start).dtype == torch.float32
    fp32 = Actor(Envs(), policy, torch.device("cpu")).forward(obs, memory, start, deterministic=True)[1]
    bf16 = actor.forward(obs, memory, start, deterministic=True)[1]
    assert 0 < (fp32 - bf16).abs().max() < 0.05  # bf16 ran (8 bits of mantissa), close to fp32
    assert all(p.dtype == torch.float32 for p in policy.parameters())
