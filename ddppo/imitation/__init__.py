"""Imitation: record demonstrations (`ddppo record`: record.py) into a dataset of shards and a manifest
(dataset.py), and behaviour-clone a policy on them on every rank (`ddppo imitate`: imitate.py,
demonstrations.py). docs/guides/imitation.md walks through record -> imitate -> fine-tune -> eval."""
