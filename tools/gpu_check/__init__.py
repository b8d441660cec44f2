"""The GPU check: a tool of the repository, not installed with ddppo (it asserts; benchmarks never do). It runs
from a checkout with tools/ on PYTHONPATH: `bash tools/gpu_check/run.sh [--dry-run]` (ddppo installed), or
`bash tools/gpu_check/device.sh PART` from a bare checkout on a GPU machine.

    run.py          the plan (every check, its budget, the defect it covers), the runner, the table and its JSON
    common.py       what the checks share: the machine (Env), bounded runs, verdict helpers, the training command
    nccl_checks.py  NCCL timeouts, a lost peer, rank placement and backend agreement
    path_checks.py  overlapped learning and workers, bf16 + compile, timers, resume/eval/export on the GPU,
                    deterministic LSTM and CNN, phase shares, habitat
    ranks.py        the in-process parts the checks run as scripts (digest, timing, stall)
    phase_check.py  are a run's phase timings plausible
    prepare_deps.py the wheels a bare checkout lacks: downloaded where there is network, unpacked on the machine
    checkout_shim/  sitecustomize mapping ddppo.envs / ddppo.benchmarks / ... to the checkout's folders
"""
