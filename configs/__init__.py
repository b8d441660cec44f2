"""The shipped configs, installed as `ddppo.configs`: `ddppo train gridnav` finds `gridnav.yaml` here by name."""
