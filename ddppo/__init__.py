"""ddppo: decentralised distributed PPO. Where each kind of code belongs (imports run down this list, never up):

infrastructure (ddppo/*.py)  shared by every application; knows no training or evaluation logic
    config.py       the schema (one dataclass per section; field help + shape flags as metadata), load_config
    distributed.py  DistContext: process group, every collective and every cross-rank wait (all bounded)
    launch.py       what the launcher says (rank, world, rendezvous) and the launcher variables of child processes
    rendezvous.py   joining the job: the socket interface, a watched rendezvous, one-line failures
    rundir.py       the one owner of a run directory's files; the one atomic write and torn-line-tolerant reader
    checkpoint.py   what a checkpoint holds; atomic save, keep-last, weights_only loading
    signals.py      SLURM/torchrun signals -> save, requeue, agree on exit
    timing.py       phase names (defined once) and the phase timer
    errors.py       errors a user can act on
model/      the policy network (encoders, recurrent core, heads)
rollout/    acting.py: the one acting path (act -> clip -> step -> check/transfer), shared by training and
            evaluation; collector, storage, GAE, GRPO, straggler preemption
ppo/        the PPO loss, the update (one gradient all-reduce per minibatch), the KL reference policy
train/      the training application: Trainer (the loop, saved state), stats, bottleneck report, resume, metrics
eval/       the evaluation application: command (which checkpoints, outputs), runner (episodes), probes, stats, video
sweep/      sweep specs, local/SLURM launchers, summaries
cli.py      `ddppo train|config|eval|sweep|bench`

Outside this package: envs/ (environments; never imports ddppo), benchmarks/ (`ddppo bench` and benchmark
scripts). tests/infra/test_import_graph.py checks the order.
"""
