"""Errors a user can act on (kept free of heavy imports so the CLI can catch them cheaply)."""


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or incompatible; the message says which and why."""
