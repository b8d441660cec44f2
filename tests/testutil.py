"""Plain helpers shared by test modules (a uniquely named module: `conftest` is not safely importable)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]

# A gridnav run of a few seconds: 4 envs x 32 steps = 128 env steps per update.
TINY = {
    "env.num_envs": 4,
    "rollout.num_steps": 32,
    "ppo.num_mini_batch": 2,
    "ppo.epochs": 2,
    "policy.hidden_size": 32,
    "env.gridnav.map_size": 7,
    "env.gridnav.num_maps": 4,
    "env.gridnav.max_episode_steps": 20,
    "log.interval_s": 0.1,
    "log.window": 1,
    "run.torch_threads": 1,
    "dist.device": "cpu",  # CPU tests mean CPU: on a GPU machine auto would put (several) ranks on a GPU
}

def as_overrides(values: dict) -> list[str]:
    """{"ppo.lr": 1e-3} -> ["ppo.lr=0.001"]: `key=value` overrides for the CLI."""
    return [f"{k}={v}" for k, v in values.items()]


def cli_env(no_slurm: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a process this test starts as its own job: no launcher variables (LAUNCH_VARS: it
    never inherits a launcher's identity from the shell that runs pytest), with `no_slurm` none of SLURM_*
    either (a job started inside an allocation must not look like a step of it), the repo on PYTHONPATH, one
    OpenMP thread unless set, then `extra`."""
    from ddppo.distributed.launch import without_launch_vars

    env = {k: v for k, v in without_launch_vars().items() if not (no_slurm and k.startswith("SLURM_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def unavailable(require_var: str, missing: str, reason: str) -> None:
    """A test feature this machine lacks: skip with one reason line, or fail where `require_var`=1 makes the
    feature mandatory (CI sets DDPPO_REQUIRE_SLURM and DDPPO_REQUIRE_NETNS)."""
    import pytest

    if os.environ.get(require_var) == "1":
        pytest.fail(f"{require_var}=1 but {missing}: {reason}", pytrace=False)
    pytest.skip(f"{missing}: {reason} (set {require_var}=1 to make this a failure)")


def vision_library(name: str) -> Any:
    """The vision library `name` (torchvision, timm, open_clip), imported; the test skips where it does not import
    (absent, or a torchvision built for another torch), and fails there under DDPPO_REQUIRE_VISION=1 (CI's vision
    venv)."""
    import importlib

    try:
        return importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 (ImportError, or torchvision's RuntimeError beside another torch)
        unavailable("DDPPO_REQUIRE_VISION", f"{name} does not import ({type(err).__name__}: {err})",
                    'pip install -e ".[vision]" beside a matching torch/torchvision pair')


def stop_process(pid: int, timeout_s: float = 10.0) -> None:
    """SIGSTOP `pid` and return once every one of its threads is stopped. kill() returns before the stop takes
    effect, so a request sent right after it can still be served (a store host that answers one more call)."""
    import signal
    import time

    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    tasks = Path(f"/proc/{pid}/task")
    while True:
        states = []
        for stat in tasks.glob("*/stat"):
            with contextlib.suppress(OSError):
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        if states and all(s in "tT" for s in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} not stopped {timeout_s:g} s after SIGSTOP (thread states {states})")
        time.sleep(0.01)


def gloo_context(rank: int = 0, world: int = 1, port: int = 0, seed: int = 0, timeout_s: float = 60.0,
                 startup_timeout_s: float = 60.0, placement: Any = None, **launch: Any):
    """A DistContext on gloo and the CPU, as rank `rank` of `world` meeting at 127.0.0.1:`port` (one process:
    an in-memory store, no port), its named groups the `placement`'s (None: colocated); `launch`: further Launch
    fields (agent_store). Close it."""
    from ddppo.distributed import Launch, init_distributed

    how = "torchrun" if world > 1 or launch else "single"
    return init_distributed("gloo", "cpu", timeout_s, startup_timeout_s, seed,
                            Launch(rank, world, rank, world, "127.0.0.1", port, how, **launch), placement)


@contextlib.contextmanager
def trainer_in_process(cfg) -> Iterator[Any]:
    """A Trainer for `cfg` in this process on a one-rank gloo context (resuming from its run dir, as `ddppo train`
    would); closed with its context afterwards."""
    from ddppo.train.builder import Trainer

    ctx = gloo_context(seed=cfg.run.seed)
    try:
        trainer = Trainer(cfg, ctx)
        try:
            yield trainer
        finally:
            trainer.close()
    finally:
        ctx.close()


def obs_to_torch(obs: dict, device: Any = "cpu") -> dict:
    """An env's numpy observations as tensors on `device`, unstaged (a rollout copies through `Actor.staging`)."""
    import numpy as np
    import torch

    return {k: torch.from_numpy(np.asarray(v)).to(device) for k, v in obs.items()}


def parameter_count(state_dict: dict) -> int:
    """Parameters of a habitat-baselines policy's state dict as habitat-baselines counts them (without the
    observation normaliser's running_mean_and_var buffers)."""
    return sum(v.numel() for k, v in state_dict.items() if "running_mean_and_var" not in k)


class Held:
    """A saved-state owner that holds a given state (a test's stand-in for the model, optimiser, counters, ...)."""

    def __init__(self, state: Any):
        self.state = state

    def state_dict(self) -> Any:
        return self.state

    def load_state_dict(self, state: Any) -> None:
        self.state = state


def save_checkpoint(run_dir: str | Path, update: int, model: dict, cfg: Any = None, optimizer: dict | None = None,
                    counters: dict | None = None, **rank: Any) -> Path:
    """RUN_DIR/checkpoints/ckpt-<update>.pt as `ddppo train` writes it: through the checkpoint manager, on a
    one-rank gloo context, with the shared namespaces model, optimizer (empty by default) and counters (update and
    env steps by default), this rank's `rank` namespaces, and `cfg` (the schema's defaults by default) as its
    config, with run.dir set to `run_dir`."""
    import dataclasses

    from ddppo.checkpoint.manager import CheckpointManager
    from ddppo.config import Config
    from ddppo.rundir import RunDir

    cfg = Config() if cfg is None else cfg
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, dir=str(run_dir)))
    ctx = gloo_context(seed=cfg.run.seed)
    try:
        manager = CheckpointManager(cfg, ctx)
        manager.register("model", Held(model), shared=True)
        manager.register("optimizer", Held({"state": {}, "param_groups": []} if optimizer is None else optimizer),
                         shared=True)
        manager.register("counters", Held({"update": update, "env_steps": 0} if counters is None else counters),
                         shared=True)
        for name, state in rank.items():
            manager.register(name, Held(state))
        assert manager.save(update), f"the manager could not write update {update} into {run_dir}"
    finally:
        ctx.close()
    return RunDir(run_dir).checkpoint_path(update)


# The markers of pyproject.toml that follow from where a test lives (one list, not a line in every file): a
# folder, a file, or one test (`file.py::name`, parametrised cases included); the most specific entry that matches
# a test decides (a test's over its file's over its folder's). `multiprocess` is everything that starts a process,
# so `-m "not multiprocess"` is the fast unit tier; tests that ask for the `cli`/`cli_many` fixtures are marked by
# that alone.
MP = ("multiprocess",)
# tests/distributed/ holds the tests with real gloo ranks and, beside them, the unit tests of ddppo/distributed/,
# which start no process
DISTRIBUTED_UNIT = ("test_cuda_env.py", "test_cuda_placement.py", "test_deadline.py", "test_dist_compat.py",
                    "test_launch.py", "test_nccl_failures.py", "test_port.py", "test_rendezvous_helpers.py",
                    "test_torch_env.py")
MARKS = {
    "distributed/": MP,
    **{f"distributed/{file}": () for file in DISTRIBUTED_UNIT},
    "imitation/test_imitate_ranks.py": MP,
    "model/test_pretrained.py": ("vision",),
    "integration/test_pretrained_training.py": ("vision", *MP),
    "integration/": MP,
    "api/": MP,
    "slurm/": ("slurm", *MP),
    "sweep/test_slurm_sweep.py": ("slurm", *MP),
    "multihost/": ("netns", *MP),
    "habitat/test_real_habitat.py": ("habitat_sim", *MP),
    "habitat_lab/test_real_habitat_lab.py": ("habitat_lab", *MP),
    "habitat_lab/test_habitat_lab_v03.py": ("habitat_lab",),
    "habitat_lab/test_real_v03_train.py": ("habitat_lab", *MP),
    "habitat_lab/test_real_v03_benchmark.py": ("habitat_lab", *MP),
    "benchmarks/test_bench_cli.py": MP,
    "benchmarks/learning/test_seeds_bench.py": MP,
    "packaging/": MP,
    "benchmarks/peers/test_habitat_baselines_bench.py::test_refuses_in_one_line_where_it_cannot_run": MP,
    "sweep/test_local_sweep.py": MP,
    "docs/test_get_started.py::test_every_get_started_command_runs": MP,
    "docs/test_site_build.py": MP,
    "train/test_wandb.py": MP,
    "normalization/test_step_overlap.py": MP,  # env worker processes
    "envs/test_worker_output.py": MP,
    "envs/test_families.py::test_a_family_package_validates_its_keys_and_trains": MP,
    "envs/test_families.py::test_a_family_whose_entry_point_fails_is_one_line_naming_it": MP,
    "envs/test_transport.py::test_workers_step_box_actions_like_in_process_envs": MP,
    "envs/test_transport.py::test_idle_workers_sleep_instead_of_spinning": MP,
    "benchmarks/speed/test_transport_rtt.py": MP,
    "envs/test_gym_env.py::test_async_vector_env_drops_keys_and_survives_asking_for_scenes": MP,
    "model/test_compiled.py::test_a_compiled_run_trains_and_gives_the_eager_log_probs": MP,  # inductor runs g++
    "reliability/test_bad_input.py": MP,
    "reliability/test_disk_full.py": MP,
    "reliability/test_env_errors.py": MP,
    "reliability/test_kill_phase.py": MP,
    "reliability/test_nonfinite.py": MP,
    "reliability/test_nonfinite_obs.py": MP,
    "reliability/test_world_size_resume.py": MP,
    "reliability/test_group_signals.py": MP,
    "reliability/test_input_surface.py": MP,
    "reliability/test_rundir_lifecycle.py": MP,
    "reliability/test_rundir_claim.py": MP,
    "habitat/test_bench_grid.py": MP,
    "habitat/test_training_grid.py::test_cpu_config_trains_on_grid_backend": MP,
    "habitat/test_scene_costs.py::test_a_run_keeps_its_scene_costs_and_a_resume_places_by_them": MP,
    "habitat/test_scene_costs.py::test_eval_of_a_run_placed_by_a_cost_file_that_is_gone_places_alike": MP,
    "habitat/test_scene_costs.py::test_a_saved_state_restores_its_placement_and_an_older_one_is_refused_with_workers_usable": MP,
    "envs/test_synthetic_scene_moves.py::test_subprocess_workers_move_their_scenes_together": MP,
    "distributed/test_scene_moves_ranks.py": MP,
    **{f"{file}::{name}": MP for file, names in {
        "train/test_bottleneck.py": ("test_a_run_logs_the_bottleneck_line",),
        "envs/test_vector.py": (  # env worker processes
            "test_workers_step_like_in_process_envs", "test_one_worker_reproduces_in_process_stepping_and_state_"
            "round_trips", "test_gym_env_through_workers", "test_worker_exception_is_raised_with_its_traceback",
            "test_build_error_in_a_worker_is_reported", "test_killed_worker_is_reported_fast",
            "test_hung_worker_times_out", "test_workers_ignore_interrupt_terminate_and_usr1",
            "test_close_stops_workers_and_frees_shared_memory",
            "test_async_send_to_some_workers_and_receive_whichever_are_ready",
            "test_forkserver_and_resource_tracker_survive_the_jobs_signals",
            "test_workers_carry_where_episodes_start_apart_from_done"),
        "rollout/test_strategies.py": ("test_the_factory_builds_the_strategy_the_config_names",
                                       "test_every_strategy_stores_the_rewards_its_scale_returns",
                                       "test_the_factory_refuses_what_no_strategy_can_run",
                                       "test_a_saved_state_of_one_strategy_does_not_load_into_another"),
        "rollout/test_ver_rules.py": ("test_the_collector_hands_the_weights_to_the_minibatches_when_asked",
                                      "test_idle_envs_at_the_rollout_end_step_with_the_old_policy_or_wait_for_the_"
                                      "new_one"),
        "train/test_overlap_learning.py": ("test_acting_policy_lags_exactly_one_update_with_overlapped_workers",),
        "rollout/test_staging.py": ("test_every_host_to_device_copy_of_every_mode_goes_through_the_stager",),
        "rollout/test_nan_masking.py": ("test_variable_mode_a_stale_nan_reward_in_padding_does_not_poison_the_next_"
                                        "update", "test_variable_mode_training_a_nan_reward_makes_skipped_updates_"
                                        "only_where_it_was_collected"),
        "rollout/test_variable.py": ("test_budget_and_recurrent_state_per_env_across_segments",
                                     "test_double_buffered_preemption_stops_every_env_at_the_same_step",
                                     "test_steps_in_flight_survive_a_checkpoint",
                                     "test_steps_in_flight_resume_in_the_runs_memory_dtype"),
        "habitat/test_env.py": ("test_subprocess_workers",),
        "envs/test_scenes.py": ("test_subprocess_workers_pass_on_each_episodes_next_scene_and_keep_env_scenes",),
        "habitat/test_sim_lifetime.py": ("test_open_simulators_are_closed_in_order_at_interpreter_exit",),
        "infra/test_min_python.py": ("test_vermin_finds_nothing_newer_than_python_3_9",
                                     "test_vermin_catches_newer_stdlib_features"),
        "eval/test_eval_habitat.py": ("test_each_episode_once_over_two_torchrun_ranks",),
        "reliability/test_security.py": ("test_pickled_object_checkpoints_are_refused_not_run",
                                         "test_config_with_a_python_tag_is_refused_not_run",
                                         "test_single_node_store_listens_only_on_master_addr"),
        "reliability/test_fuzz_cli.py": ("test_fuzz_cases_through_real_processes",),
    }.items() for name in names},
}
# Fixtures that start processes (the `ddppo` CLI; a training run shared by a module's tests): their users are
# multiprocess too.
SPAWNING_FIXTURES = ("cli", "cli_many", "gridnav_run", "evaluated", "trained")


def marks_for(where: str, fixtures) -> set[str]:
    """The markers of the test `where` (`path/of/file.py::name[case]`, relative to tests/) that asks for
    `fixtures`."""
    name = where.split("[")[0]
    matching = [prefix for prefix in MARKS if ("::" in prefix and name == prefix) or
                ("::" not in prefix and where.startswith(prefix))]
    found = set(MARKS[max(matching, key=len)]) if matching else set()
    if any(f in fixtures for f in SPAWNING_FIXTURES):
        found.update(MP)
    return found


class DictStore:
    """An in-memory stand-in for a rendezvous store's set/check/get/wait (one process, keys already there)."""

    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def check(self, keys):
        return all(k in self.data for k in keys)

    def get(self, key):
        return self.data[key]

    def wait(self, keys):
        assert self.check(keys)


# ----------------------------------------------------- sample weighting probes (ppo/update.py, variable mode)
def env_value_probe(num_params: int) -> Any:
    """A stand-in policy whose value for a sample is theta[obs["env"]] (theta = 0, one parameter per env) and whose
    log-probabilities and entropies are 0: with returns -1, an unclipped value loss and value_coef 1, the
    gradient on theta[k] is exactly env k's summed sample weight in the loss."""
    import torch

    class EnvValueProbe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.theta = torch.nn.Parameter(torch.zeros(num_params))

        def evaluate_with_params(self, obs, hidden, episode_start, actions):
            values = self.theta[obs["env"].long()]
            zeros = torch.zeros_like(values.detach())
            return zeros, zeros, values, None

    return EnvValueProbe()


def build_collector(cfg: Any, envs: Any, policy: Any, preemption: Any, gamma: float = 0.9, scale: Any = None,
                    observers: Any = None, precision: str = "fp32") -> Any:
    """`make_collector` as the builder calls it, on the CPU: acting through an Actor (in run.precision `precision`),
    a scoring stage of `gamma` (with `scale`, normalize.reward's scaler, or a stand-in), the envs' own episode
    observers or `observers`."""
    import torch

    from ddppo.rollout.acting import Actor
    from ddppo.rollout.factory import make_collector
    from ddppo.rollout.scoring import Scoring
    from ddppo.timing import Timer

    return make_collector(cfg, Actor(envs, policy, torch.device("cpu"), Timer(), precision=precision), preemption,
                          Scoring(gamma, scale), observers)


class OneStorage:
    """A collector with the one storage it always collects into (as SerialLearning does): `collect(update)` is
    `collector.collect(update, storage)` with the rollout scored (train/phases.py); every other member is the
    collector's."""

    def __init__(self, collector: Any, storage: Any):
        self.collector, self.storage = collector, storage

    def collect(self, update: int) -> Any:
        import dataclasses

        res = self.collector.collect(update, self.storage)
        return dataclasses.replace(res, rollout=self.collector.scoring.finish(res.rollout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collector, name)


def variable_rollout(lengths: list[int], num_steps: int, first_env: int = 0) -> Any:
    """A Rollout with env n's variable-mode segment of lengths[n] steps (inserted interleaved, as ready envs come
    back), observation "env" = first_env + n, VER's importance weights."""
    import gymnasium
    import numpy as np
    import torch

    from ddppo.rollout.storage import RolloutStorage
    from ddppo.rollout.variable import importance_weights

    n = len(lengths)
    space = gymnasium.spaces.Dict({"env": gymnasium.spaces.Box(0, np.inf, (), np.float32)})
    storage = RolloutStorage(max(2 * num_steps, max(lengths)), n, space, gymnasium.spaces.Discrete(2), {},
                             torch.device("cpu"))
    env_ids = torch.arange(first_env, first_env + n, dtype=torch.float32)
    storage.begin({"env": env_ids}, torch.ones(n), {}, segments=True)
    remaining = list(lengths)
    while any(remaining):
        envs = torch.tensor([e for e in range(n) if remaining[e]])
        k = len(envs)
        zeros = torch.zeros(k)
        storage.insert_envs(envs, torch.zeros(k, dtype=torch.long), zeros, zeros, zeros, zeros,
                            {"env": env_ids[envs]}, zeros)
        for e in envs.tolist():
            remaining[e] -= 1
    return storage.rollout(torch.zeros(n), importance_weights(storage.lengths, num_steps))


def epoch_gradients(updater: Any, rollout: Any, seed: int = 0) -> Any:
    """(epochs, P): the applied (all-reduced, scaled, unclipped) gradients of one `updater.update(rollout, adv)`,
    with advantages 0 and returns -1 over the rollout's valid samples, summed per epoch; the optimiser step is
    replaced by recording them, so the parameters stay where they are."""
    import torch

    from ddppo.advantage import Advantages
    from ddppo.timing import Timer

    grads: list = []
    updater.optimizer.step = lambda: grads.append(torch.cat([p.grad.reshape(-1).clone() for p in updater.params]))
    adv = Advantages(torch.zeros_like(rollout.rewards), torch.full_like(rollout.rewards, -1.0), rollout.valid)
    updater.update(rollout, adv, Timer(), generator=torch.Generator().manual_seed(seed))
    per_epoch = len(grads) // updater.cfg.epochs
    return torch.stack(grads).reshape(updater.cfg.epochs, per_epoch, -1).sum(1)
