"""read_launch / expand_first_host: who this process is, from torchrun's, SLURM's or no launcher's variables."""

import pytest

from ddppo.distributed.port import job_port
from ddppo.distributed import rank_seed
from ddppo.distributed.launch import LAUNCH_VARS, Launch, expand_first_host, read_launch, without_launch_vars
from ddppo.errors import LaunchError

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29511", "TORCHELASTIC_RESTART_COUNT": "2",
            "TORCHELASTIC_USE_AGENT_STORE": "True"}
SRUN = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
        "SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_ID": "123456", "SLURM_JOB_NODELIST": "gpu[03-04]",
        "SLURM_STEP_NODELIST": "gpu[03-04]"}


@pytest.mark.parametrize("nodelist, first", [
    ("gpu03", "gpu03"),
    ("gpu[03-05,07],cpu1", "gpu03"),
    ("gpu[07,03-05]", "gpu07"),  # SLURM's order, not the smallest
    ("node1,node2", "node1"),
    (" n[2,5] ", "n2"),
    ("gpu[007]", "gpu007"),  # zero padding kept
    ("a-[1-2]", "a-1"),
    ("rack[1-2]-node[01-04]", "rack1-node01"),  # several bracket groups in one hostname
    ("node[1-2]-ib,login1", "node1-ib"),  # a suffix after the range
    ("10.1.2.3", "10.1.2.3"),
])
def test_expand_first_host(nodelist, first):
    assert expand_first_host(nodelist) == first


@pytest.mark.parametrize("bad", ["", ",node1", "gpu[03", "gpu]"])
def test_expand_first_host_rejects_malformed_lists(bad):
    with pytest.raises(ValueError, match="SLURM_JOB_NODELIST"):
        expand_first_host(bad)


def test_torchrun_variables():
    assert read_launch(TORCHRUN) == Launch(rank=3, world_size=4, local_rank=1, local_world_size=2,
                                           master_addr="10.0.0.7", master_port=29511, source="torchrun",
                                           agent_store=True)


def test_torchrun_defaults_for_optional_variables():
    launch = read_launch({"RANK": "1", "WORLD_SIZE": "2"})
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (1, 2, 0, 2)
    assert (launch.master_addr, launch.master_port, launch.agent_store) == ("127.0.0.1", 29500, False)


def test_torchrun_wins_over_slurm():
    """torchrun inside an srun step: torchrun's variables describe the ranks."""
    launch = read_launch({**SRUN, **TORCHRUN})
    assert launch.source == "torchrun" and launch.rank == 3 and launch.world_size == 4


def test_slurm_step_variables():
    launch = read_launch(SRUN)
    assert launch == Launch(rank=5, world_size=8, local_rank=1, local_world_size=4, master_addr="gpu03",
                            master_port=job_port(123456), source="slurm", agent_store=False)


def test_slurm_port_is_derived_from_the_job_id_and_stays_in_range():
    ports = {read_launch({**SRUN, "SLURM_JOB_ID": str(j)}).master_port for j in (1, 19999, 20000, 987654321)}
    assert all(20000 <= p < 40000 for p in ports) and len(ports) == 4


def test_slurm_master_overridable():
    launch = read_launch({**SRUN, "MASTER_ADDR": "head", "MASTER_PORT": "31000", "SLURM_RESTART_COUNT": "3"})
    assert (launch.master_addr, launch.master_port) == ("head", 31000)


def test_slurm_empty_master_variables_fall_back_to_derived_values():
    launch = read_launch({**SRUN, "MASTER_ADDR": "", "MASTER_PORT": ""})
    assert (launch.master_addr, launch.master_port) == ("gpu03", job_port(123456))


def test_slurm_multi_part_hostnames():
    env = {**SRUN, "SLURM_STEP_NODELIST": "rack[1-2]-node[01-04]", "SLURM_JOB_NODELIST": "rack[1-2]-node[01-04]"}
    assert read_launch(env).master_addr == "rack1-node01"


def test_slurm_step_nodelist_preferred_over_job_nodelist():
    """A step may run on a subset of the allocation: its first node hosts the store."""
    launch = read_launch({**SRUN, "SLURM_JOB_NODELIST": "gpu[01-04]", "SLURM_STEP_NODELIST": "gpu[03-04]"})
    assert launch.master_addr == "gpu03"


def test_slurm_job_nodes_used_when_step_nodes_missing():
    env = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST")}
    launch = read_launch({**env, "SLURM_JOB_NUM_NODES": "4"})
    assert (launch.local_world_size, launch.master_addr) == (2, "gpu03")


def test_slurm_batch_script_without_srun_is_a_single_process():
    """The batch step has SLURM_PROCID=0 and SLURM_NTASKS but no step: it is not one rank of N."""
    env = {k: v for k, v in SRUN.items() if not k.startswith("SLURM_STEP_")}
    assert read_launch({**env, "SLURM_PROCID": "0"}).source == "single"


def test_no_launcher_is_a_single_process():
    assert read_launch({}) == Launch(0, 1, 0, 1, "127.0.0.1", 0, "single")


def test_rank_seeds_are_deterministic_distinct_and_depend_on_the_run_seed():
    seeds = [rank_seed(7, r) for r in range(64)]
    assert seeds == [rank_seed(7, r) for r in range(64)]
    assert len(set(seeds)) == 64
    assert rank_seed(8, 0) != rank_seed(7, 0)


def test_a_new_job_inherits_no_launch_variable():
    env = without_launch_vars({**TORCHRUN, **SRUN, "PATH": "/bin", "SLURM_JOB_ID": "7"})
    assert not set(env) & set(LAUNCH_VARS) and env["PATH"] == "/bin"
    # everything read_launch reads to decide who this process is, is in the list
    assert read_launch(env).source == "single"


def test_torch_threads_are_the_cores_a_rank_owns():
    from ddppo.distributed import torch_threads
    from ddppo.distributed.launch import Launch

    torchrun = Launch(0, 4, 0, 4, "127.0.0.1", 29500, "torchrun")
    slurm = Launch(0, 4, 0, 4, "127.0.0.1", 29500, "slurm")
    assert torch_threads(3, torchrun, {}, usable_cpus=16) == 3  # an explicit setting wins
    assert torch_threads(0, torchrun, {}, usable_cpus=16) == 4  # 16 CPUs shared by 4 local ranks
    assert torch_threads(0, torchrun, {}, usable_cpus=2) == 1  # never 0
    assert torch_threads(0, slurm, {"SLURM_CPUS_PER_TASK": "6"}, usable_cpus=64) == 6  # srun: a cpuset per task
    assert torch_threads(0, slurm, {"SLURM_CPUS_PER_TASK": "6"}, usable_cpus=4) == 4  # ... within the mask
    assert torch_threads(0, slurm, {}, usable_cpus=16) == 4  # no per-task count: shared


@pytest.mark.parametrize("environ, named", [
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5 with WORLD_SIZE=2"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1 must be >= 0"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not a whole number"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
    ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
     "LOCAL_RANK=2 with LOCAL_WORLD_SIZE=2"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 must be in [1, 65535]"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": ""}, "MASTER_ADDR='' is empty"),
    ({**SRUN, "SLURM_PROCID": "8"}, "SLURM_PROCID=8 with SLURM_STEP_NUM_TASKS=8"),
    ({**SRUN, "SLURM_JOB_ID": "12x"}, "SLURM_JOB_ID='12x'"),
    ({**SRUN, "SLURM_STEP_NODELIST": "gpu[03"}, "SLURM_JOB_NODELIST='gpu[03'"),
])
def test_launcher_variables_that_cannot_be_right_are_refused_naming_them(environ, named):
    with pytest.raises(LaunchError) as err:
        read_launch(environ)
    assert named in str(err.value) and "\n" not in str(err.value)
