"""An environment's own exception is reported the same way in-process (env.num_workers=0) and through
subprocess workers: exit 2, one line naming the phase, the exception and where it was raised, no traceback
(it is logged with log.level=DEBUG)."""

from __future__ import annotations

from pathlib import Path

from rel_util import EMPTY_CONFIG, describe, run_cli_many, synthetic_overrides


def test_env_exception_is_one_line_exit_2_in_process_and_through_workers(tmp_path: Path):
    def train(name: str, workers: int, *extra: str) -> list[str]:
        return ["train", str(EMPTY_CONFIG), *synthetic_overrides(tmp_path / name, **{
            "env.num_workers": workers, "env.synthetic.fail_at_step": 5}), *extra]

    runs = [train("in-process", 0), train("workers", 1), train("debug", 0, "log.level=DEBUG")]
    in_process, workers, debug = run_cli_many(runs)
    reports = []
    for res in (in_process, workers):
        assert res.returncode == 2, describe(res)
        assert "Traceback" not in res.stderr, describe(res)
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("ddppo: ")]
        assert len(lines) == 1, describe(res)
        reports.append(lines[0])
    assert reports[0].startswith("ddppo: environment error: env failed during 'step': SyntheticFailure: ")
    assert reports[1].startswith("ddppo: environment error: env worker 0 failed during 'step': SyntheticFailure: ")
    assert reports[0].split("'step': ")[1] == reports[1].split("'step': ")[1]  # the same report
    assert "deliberate failure at step 5" in reports[0] and "(at synthetic/env.py:" in reports[0]
    assert debug.returncode == 2 and "Traceback" in debug.stderr and 'envs/synthetic/env.py"' in debug.stderr
