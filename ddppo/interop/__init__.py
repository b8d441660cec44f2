"""Other trainers' files: safe_unpickle.py (the restricted unpickler for files that are not weights-only),
habitat_checkpoint.py (habitat-baselines DD-PPO checkpoints: key mapping, reading, compatibility),
export.py (`ddppo export`: a ddppo run written in another trainer's format), cli.py (registers `export`)."""
