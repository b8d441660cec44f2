"""The env runtime: what runs envs apart from the trainer (worker processes and how they talk to it)."""
