"""The one benchmark home, installed as `ddppo.benchmarks`, grouped by what it measures:

    peers/     ddppo side by side with another trainer or library (stable-baselines3, habitat-baselines, habitat-lab)
    speed/     what a step, an update or a save costs: fps, time per phase, bytes
    learning/  what is learnt: success or return over seeds, steps to a threshold, what preemption does to it

Every benchmark runs one way, `ddppo bench NAME` (`cli.py` registers the subcommand through the `ddppo.commands`
entry point; the library never imports this package): each bench module says its `NAME`, a one-line `HELP` and
`main(argv)`, and `cli.py` builds its table from them. Benchmarks print figures and never assert; they write them
as JSON to `results/NAME.json` in the working directory unless `--out` says otherwise, and the dated figures the
docs cite are in `results/` here. What several benchmarks share is in `common.py`. (The GPU check, which asserts,
is a tool of the repository: tools/gpu_check/.)
"""
