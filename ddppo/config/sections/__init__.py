"""The config schema's sections by theme (ddppo/config/schema.py assembles them into `Config`)."""
