"""The fast unit tier (`-m "not multiprocess"`) is every test that starts no process: markers follow from where
a test lives and which fixtures it asks for (MARKS in tests/testutil.py, applied by tests/conftest.py), and an
unmarked test that starts one fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from testutil import marks_for


def test_marks_follow_folder_file_test_and_fixture():
    assert marks_for("distributed/test_faults.py::test_x", ()) == {"multiprocess"}
    assert marks_for("slurm/test_single_node.py::test_x", ()) == {"slurm", "multiprocess"}
    assert marks_for("train/test_bottleneck.py::test_a_run_logs_the_bottleneck_line", ()) == {"multiprocess"}
    assert marks_for("train/test_bottleneck.py::test_diagnose_names_the_env", ()) == set()
    assert marks_for("rollout/test_variable.py::test_steps_in_flight_survive_a_checkpoint[a-b]", ()) == {"multiprocess"}
    assert marks_for("config/test_config.py::test_x", ("tmp_path", "cli")) == {"multiprocess"}
    assert marks_for("config/test_config.py::test_x", ("tmp_path",)) == set()
    # the most specific entry decides: the unit tests of ddppo/distributed/ beside the gloo-rank tests
    assert marks_for("distributed/test_port.py::test_x", ()) == set()
    assert marks_for("distributed/test_port.py::test_x", ("cli",)) == {"multiprocess"}
    assert marks_for("integration/test_pretrained_training.py::test_x", ()) == {"vision", "multiprocess"}


def test_an_unmarked_test_that_starts_a_process_fails_saying_where_to_mark_it():
    with pytest.raises(AssertionError, match="not marked multiprocess: add it to MARKS"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
