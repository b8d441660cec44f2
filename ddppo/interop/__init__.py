"""Other trainers' files, below the checkpoint format: safe_unpickle.py (the restricted unpickler for files that
are not weights-only), foreign.py (foreign checkpoints as one type), habitat_checkpoint.py (habitat-baselines
DD-PPO checkpoints: key mapping, reading, compatibility). Writing them is the `ddppo export` application
(ddppo/export/)."""
