"""ddppo: decentralised distributed PPO. Where each kind of code belongs (imports run down this list, never up: the
layers are `LAYERS` below); every module is named here (tests/infra/test_import_graph.py checks that, and the order):

infrastructure   shared by every application; knows no training or evaluation logic
    config/         schema.py (the sections assembled into Config; help, shape, choices, range as field
                    metadata), sections/ (the sections by theme: run.py, env.py, learning.py, policy.py,
                    placement.py), checks.py (declared ranges, cross-field rules), loading.py (YAML <- dotlist),
                    describe.py (--explain, --help-keys), sizes.py (the memory a config needs, refused before
                    allocating)
    distributed/    context.py (DistContext: the only door to collectives, every wait bounded, failures named),
                    placement.py (roles on rank ranges: the named groups every collective runs on),
                    store.py (bounded store calls), startup.py (device, store, group, threads), rendezvous.py
                    (joining the job, one-line failures), launch.py (launcher variables), generation.py (the
                    namespace of one start, agreed by every rank), cuda.py (a GPU per rank, NCCL and cuBLAS
                    settings), buckets.py (gradient buckets all-reduced as backward fills them), deadline.py
                    (the last-resort bound on a rank that is leaving or stuck in a native call), torch_env.py
                    (torch's NCCL variables parsed as torch parses them), port.py (a SLURM job's rendezvous
                    port, below the ephemeral range), visible.py (the GPUs a process may use)
    interop/        other trainers' files, below the checkpoint format: safe_unpickle.py, foreign.py (foreign
                    checkpoints as one type), habitat_checkpoint.py (habitat-baselines checkpoints: the key
                    mapping, reading)
    files.py        general file I/O: the one atomic write, the torn-line-tolerant JSON-lines readers, sha256
    rundir/         the one owner of a run directory: its files (__init__.py: their names, checkpoint names,
                    pruning, "finished"), claim.py (one live writer per directory, on local disks and shared file
                    systems), holder.py (the holder record, when a holder is gone, the mount table)
    checkpoint/     format.py (what a checkpoint file holds, format 2; atomic save, weights_only loading, the
                    reader of format 1), manager.py (CheckpointManager: given the saved-state owners, it alone
                    saves, loads, prunes and picks the file to resume), fits.py (whether a checkpoint fits a
                    config), rng.py (RNG states and their owner)
    signals.py      SLURM/torchrun signals -> save, requeue, agree on exit
    watchdog.py     the per-update watchdog (faulthandler's timer: stacks and exit 1 past dist.update_timeout_s)
    timing.py       phase names (defined once) and the phase timer
    errors.py       errors a user can act on: every class of them, and the kinds and labels the CLI reports
    field_metadata.py  the config's field metadata (`doc`) and its validation idiom: a leaf (it imports nothing of
                    the project) that the config and the environments' option sections (envs/) both import
    entry_points.py installed packages' entry points of a group (`ddppo.commands`, `ddppo.env_families`): a leaf
                    the CLI and the environment registry share
    user_code.py    the user's modules, imported from the working directory as `python -m` would, and the names
                    they register (policy architectures, encoders, memory cores, advantage estimators) as config choices
normalization/  observation and reward normalisation, built once and handed to the policy and the collector:
            spaces.py (what `auto` resolves to), moments.py (running moments, the parallel-variance merge),
            observations.py (the statistics inside the policy), live.py (normalize.update=step on the acting
            path), rewards.py (the reward scaler), training.py (Normalization: built from the config and spaces,
            merged over the ranks once per update, its saved-state owners)
model/      build.py (the architecture policy.architecture names; the decorators registering your policies, encoders
            and cores), actor_critic.py (the interface every policy offers: heads, action kinds, act / evaluate),
            policy.py (ddppo's own network on that interface), encoders.py (an encoder per observation key, the
            built-in ones registered, Trunk fusing them), core.py (the memory core's protocol, and none),
            cores.py (the built-in cores under their policy.rnn_type names), recurrent.py (the GRU/LSTM core),
            resnet.py (GroupNorm ResNet encoder), habitat_baselines.py (habitat-baselines' PointNavResNetPolicy),
            habitat_baselines_simple.py (its PointNavBaselinePolicy: SimpleCNN + GRU),
            pooling.py (adaptive pooling with a deterministic CUDA path), memory.py (the policy's memory: GRU
            state, KV cache, as one opaque value), transformer.py (the transformer core and its per-env KV cache),
            pretrained.py (torchvision, timm and open_clip image encoders: the library's backbone and a trained
            head), encoder_weights.py (policy.encoder_weights: reading a weights file into them, its sha256 kept
            in the checkpoint), kept.py (a frozen encoder's features kept in the rollout in place of its
            images), precision.py (run.precision's autocast), compiled.py (run.compile: the encoders
            compiled), actions.py (the action distributions: categorical, one per dim, Bernoulli per dim, Gaussian)
rollout/    acting.py (the one acting path: act -> clip -> step -> check/transfer, shared by training and
            evaluation), collector.py (the strategy interface), factory.py (builds lockstep.py, overlapped.py or
            variable.py from the rollout config), workers.py (the worker-API half overlapped and variable share),
            storage.py (the buffers and their one writer's inserts), scoring.py (the scoring stage between
            collect and advantages: reward model, reward scaling, truncation bootstraps; the Scorer protocol),
            reward_model.py (reward.model: the local scorer of each step's results), rollout.py (the rollout as
            one value), staging.py (every host-to-device copy of a step), preemption.py,
            observers.py (the episode observers' protocol), episode_metrics.py (which episode metrics train/*
            aggregates, fixed at start), scenes.py (per-scene samples, gradient weight and outcomes:
            train/scene/*)
advantage/  advantage estimation, chosen once from ppo.advantage: estimator.py (the interface, the Advantages it
            returns, the decorator registering an estimator as a ppo.advantage choice, the one the config names),
            gae.py (GAE, and normalisation over every rank), grpo.py (critic-free GRPO, its carry and its config
            rules)
ppo/        loss.py, update.py (one gradient all-reduce per minibatch), batches.py (the minibatches cut from a
            rollout and its advantages), reference.py (the KL reference policy)
train/      the training application: builder.py (every part assembled once from the config: the only place a
            mode is decided), loop.py (the loop, which only iterates over those parts), progress.py (update, env
            steps, window, KL coefficient: a saved-state owner of its own), phases.py (one update's phases:
            collect, agree, learn, hand over), learning.py (serial learning and the protocol strategies follow),
            overlap_learning.py (rollout.overlap_learning: learner thread, acting copy, double buffer),
            startup.py (run-directory start-up: stored config, claim, config.yaml), objective.py (what the
            learner optimises: a reward model's parts, GRPO's normalised returns), stats.py, scene_costs.py
            (measured scene costs kept in the run dir), bottleneck.py (report), metrics.py (sinks), wandb_sink.py
eval/       the evaluation application: command.py (which checkpoints, outputs), runner.py (episodes),
            loading.py (a checkpoint's policy as eval acts with it; ddppo.api.Agent and `ddppo record --policy`
            load and act through it too),
            probes.py, stats.py, video.py
export/     the export application (`ddppo export`): cli.py, habitat_baselines.py (a run as habitat-baselines'
            ckpt.N.pth)
sweep/      spec.py, runs.py (the sweep dir, run status), launch.py (local/SLURM launchers), gpus.py (GPUs per
            parallel local run), curves.py (runs' learning curves: common grid, mean and interval, `ddppo plot`),
            summary.py, cli.py
imitation/  imitation (`ddppo record`, `ddppo imitate`): dataset.py (demonstration shards, journals and the manifest;
            checks), record.py (the env's expert or a policy, every rank its share, resume), demonstrations.py (a
            rank's episodes, held-out split, padded batches, inflection weights), imitate.py (behaviour cloning with
            training's parts), cli.py
api/        the Python API: agent.py (Agent: a checkpoint's policy acting on your observations), evaluation.py
            (evaluate: an Agent in a gymnasium env, `ddppo eval`'s statistics), training.py (load_config, train:
            what `ddppo train` runs)
cli.py      `ddppo train|config|eval|plot|sweep|bench|export|rundir|record|imitate`

Installed under this package from the repository's own top-level folders (pyproject.toml's package-dir):
ddppo.envs (envs/: environments, its runtime/ apart from its families, one package each; imports nothing of ddppo but
the data package ddppo.configs and the leaves ddppo.field_metadata and ddppo.entry_points), ddppo.benchmarks
(benchmarks/: every `ddppo bench` benchmark, grouped as peers/, speed/ and learning/; registers its subcommand
through the `ddppo.commands` entry point and is imported by nothing here), ddppo.configs (configs/: the shipped
configs, by name) and ddppo.slurm (slurm/: the
sbatch scripts).
"""

# The layers, lowest first: a module imports its own layer and the layers below, never above; the groups of one
# layer (train, eval, export) are applications side by side and never import each other. The one list:
# tests/infra/test_import_graph.py checks the imports, the map above and docs/design/architecture.md against it.
LAYERS = (("infrastructure",), ("normalization",), ("model",), ("rollout",), ("advantage",), ("ppo",),
          ("train", "eval", "export"), ("sweep",), ("imitation",), ("api",), ("cli",), ("benchmarks",))
INFRASTRUCTURE_PACKAGES = ("distributed", "interop", "config", "checkpoint", "rundir")  # of the infrastructure layer
