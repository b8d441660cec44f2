"""ddppo: decentralised distributed PPO. Where each kind of code belongs (imports run down this list, never up):

infrastructure   shared by every application; knows no training or evaluation logic
    config/         schema.py (one dataclass per section; help, shape, choices, range as field metadata),
                    checks.py (declared ranges, cross-field rules), loading.py (YAML <- dotlist), describe.py
    distributed/    context.py (DistContext: the only door to collectives, every wait bounded, failures named),
                    store.py (bounded store calls), startup.py (device, store, group, threads), rendezvous.py
                    (joining the job, one-line failures), launch.py (launcher variables), buckets.py (gradient
                    buckets all-reduced as backward fills them)
    interop/        other trainers' files: safe_unpickle.py, habitat_checkpoint.py (habitat-baselines
                    checkpoints in), export.py (out), cli.py (`ddppo export`)
    rundir.py       the one owner of a run directory's files; the one atomic write and torn-line-tolerant reader
    checkpoint.py   what a checkpoint holds; atomic save, keep-last, weights_only loading
    signals.py      SLURM/torchrun signals -> save, requeue, agree on exit
    timing.py       phase names (defined once) and the phase timer
    errors.py       errors a user can act on
model/      the policy network (encoders, recurrent core, heads)
rollout/    acting.py: the one acting path (act -> clip -> step -> check/transfer), shared by training and
            evaluation; staging (every host-to-device copy of a step); collector.py: the strategy interface,
            built by factory.py as lockstep.py, overlapped.py or variable.py (workers.py: their shared
            worker-API half); storage, GAE, GRPO, straggler preemption
ppo/        the PPO loss, the update (one gradient all-reduce per minibatch), the KL reference policy
train/      the training application: Trainer (the loop, saved state), stats, bottleneck report, resume, metrics
eval/       the evaluation application: command (which checkpoints, outputs), runner (episodes), probes, stats, video
sweep/      sweep specs, local/SLURM launchers, summaries
cli.py      `ddppo train|config|eval|sweep|bench|export`

Outside this package: envs/ (environments; never imports ddppo), benchmarks/ (`ddppo bench` and benchmark
scripts). tests/infra/test_import_graph.py checks the order.
"""
