"""Launcher variables read as torch reads them (issue 43 item 4): torch's getCvarBool / getCvarInt rules
(c10d/Utils.hpp), and one ConfigError line, before the rendezvous, for any value torch would refuse."""

from __future__ import annotations

import pytest
import torch

from ddppo.errors import ConfigError
from ddppo.distributed import cuda, startup
from ddppo.distributed.launch import Launch, read_launch

ON = ["1", "y", "yes", "t", "true", "Y", "YES", "T", "True", "TRUE", "tRuE"]
OFF = ["0", "n", "no", "f", "false", "N", "No", "F", "False", "FALSE"]
REFUSED = ["on", "off", " 1", "1 ", "", "2", "enable", "yes please", "0x1", "ja"]


@pytest.mark.parametrize("value", ON)
def test_every_spelling_torch_reads_as_on_is_blocking_wait_without_warning(value):
    settings, warning = cuda.nccl_failure_env({"TORCH_NCCL_BLOCKING_WAIT": value})
    assert settings == {"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"} and warning is None


@pytest.mark.parametrize("value", OFF)
def test_every_spelling_torch_reads_as_off_keeps_ncclss_own_handling_and_says_so(value):
    settings, warning = cuda.nccl_failure_env({"TORCH_NCCL_BLOCKING_WAIT": value})
    assert settings == {} and "NCCL's watchdog decides" in warning


@pytest.mark.parametrize("name", ["TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_DUMP_ON_TIMEOUT"])
@pytest.mark.parametrize("value", REFUSED)
def test_a_bool_torch_refuses_is_one_config_error_line_naming_it(name, value):
    with pytest.raises(ConfigError) as err:
        cuda.nccl_failure_env({name: value})
    line = str(err.value)
    assert f"{name}={value!r}" in line and "\n" not in line and "y/yes/1/t/true" in line


def test_the_legacy_name_is_checked_even_where_the_new_name_wins():
    """getCvarBool reads every set name (the legacy one first): a bad legacy value raises in torch."""
    with pytest.raises(ConfigError, match="NCCL_BLOCKING_WAIT='on'"):
        cuda.nccl_failure_env({"TORCH_NCCL_BLOCKING_WAIT": "1", "NCCL_BLOCKING_WAIT": "on"})
    settings, warning = cuda.nccl_failure_env({"TORCH_NCCL_BLOCKING_WAIT": "1", "NCCL_BLOCKING_WAIT": "0"})
    assert warning is None and settings == {"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}  # the first name wins


@pytest.mark.parametrize("value,ok", [("3", True), (" 3", True), ("-1", True), ("+2", True), ("3abc", True),
                                      ("", False), ("abc", False), (" ", False), ("x3", False),
                                      ("99999999999", False)])
def test_async_error_handling_is_read_as_std_stoi_reads_it(value, ok):
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": value}
    if ok:
        cuda.nccl_failure_env(env)
    else:
        with pytest.raises(ConfigError, match="TORCH_NCCL_ASYNC_ERROR_HANDLING="):
            cuda.nccl_failure_env(env)


def test_a_refused_value_stops_a_cuda_rank_before_the_rendezvous(monkeypatch):
    """The check runs before any store is made (a rank would otherwise wait for its peers, then fail in torch)."""
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "on")
    monkeypatch.setattr(startup, "choose_device_or_why", lambda setting, local_rank, world: (torch.device("cuda", 0), ""))
    monkeypatch.setattr(startup.rendezvous, "watched", lambda *a, **k: pytest.fail("rendezvous started"))
    launch = Launch(0, 2, 0, 2, "127.0.0.1", 1, "torchrun")
    with pytest.raises(ConfigError, match="TORCH_NCCL_BLOCKING_WAIT='on'"):
        startup.init_distributed("auto", "cuda", 10, 10, 0, launch)


def test_a_refused_value_does_not_stop_a_gloo_or_cpu_rank(monkeypatch):
    """torch reads them only for an NCCL group: gloo and the CPU do not care."""
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "on")
    seen = []
    monkeypatch.setattr(startup.rendezvous, "watched", lambda *a, **k: seen.append(1) or pytest.skip("reached"))
    launch = Launch(0, 2, 0, 2, "127.0.0.1", 1, "torchrun")
    with pytest.raises(pytest.skip.Exception):
        startup.init_distributed("auto", "cpu", 10, 10, 0, launch)
    assert seen


@pytest.mark.parametrize("value,agent", [("True", True), ("False", False), ("true", False), ("TRUE", False),
                                         ("1", False)])
def test_the_agent_store_flag_is_compared_as_torch_compares_it(value, agent):
    env = {"RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_USE_AGENT_STORE": value}
    assert read_launch(env).agent_store is agent
