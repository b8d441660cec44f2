"""Environments for ddppo. Never imports `ddppo`."""
