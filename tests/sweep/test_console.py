"""What `ddppo sweep` prints on the console, through the real CLI entry point (in process): one-line errors
without escaped newlines, and no library warnings from `sweep summary`."""

from __future__ import annotations

import contextlib
import json
import warnings

from ddppo.cli import main
from ddppo.files import write_json

# matplotlib's first import in a fresh environment runs fc-list to build its font cache: done here, at import,
# not inside a test, where the fast tier's guard takes it for a process the test started
with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401


def test_a_sweep_of_invalid_runs_fails_in_one_plain_line(spec_file, tmp_path, capsys):
    spec = spec_file(grid={"ppo.lr": [-1.0, -2.0]}, seeds=1)
    rc = main(["sweep", str(spec), "--dry-run", "--sweep-dir", str(tmp_path / "sw")])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "\\n" not in lines[0], lines[0]  # a newline in the message came out escaped, as a literal \n
    assert "nothing was launched: " in lines[0] and "ppo.lr=-1.0 must be > 0" in lines[0]
    assert "ppo.lr=-2.0 must be > 0" in lines[0]
    assert not (tmp_path / "sw").exists()


def make_run(sweep_dir, name: str, rewards: list) -> dict:
    run_dir = sweep_dir / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("run:\n  total_env_steps: 200\n")
    (run_dir / "metrics.jsonl").write_text("".join(
        json.dumps({"update": i + 1, "env_steps": 100 * (i + 1), "train/reward": r}) + "\n"
        for i, r in enumerate(rewards)))
    return {"name": name, "variant": name, "seed": 0, "run_dir": f"runs/{name}"}


def test_summary_with_a_metric_no_run_logged_prints_no_warning(tmp_path, capsys):
    """CartPole-like runs log no train/success: its plot has no labelled line, which made matplotlib warn
    ("No artists with labels found to put in legend") with a source line on the console."""
    sweep = tmp_path / "sw"
    write_json(sweep / "sweep.json", {"name": "fake", "runs": [make_run(sweep, "a", [1.0, 2.0])]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        rc = main(["sweep", "summary", str(sweep), "--metrics", "train/reward,train/success"])
    out = capsys.readouterr()
    assert rc == 0
    assert "Warning" not in out.err
    assert (sweep / "summary" / "train_success.png").is_file()
    assert (sweep / "summary" / "curves.png").is_file()
