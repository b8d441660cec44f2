"""The Python API guide's example (docs/examples/python_api.py) runs as a user runs it: `python python_api.py` in
a folder holding it and corridor.py, with the installed package; it trains, loads the run and acts in gymnasium."""

from __future__ import annotations

import shutil
import subprocess
import sys

from testutil import REPO, cli_env

EXAMPLES = REPO / "docs" / "examples"


def test_the_python_api_example_trains_and_acts(tmp_path):
    for name in ("corridor.py", "python_api.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    env = cli_env()
    env.pop("PYTHONPATH", None)
    res = subprocess.run([sys.executable, "python_api.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "success over 5 episodes:" in res.stdout
    assert (tmp_path / "runs" / "corridor" / "checkpoints" / "ckpt-32.pt").is_file()
