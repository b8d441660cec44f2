"""The one benchmark home: `ddppo bench throughput|memory|sb3` (importable, installed with the package) and
repository scripts (`scaling.py`, `env_fps.py`); figures go to `results/`."""
