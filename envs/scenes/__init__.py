"""Navigable scenes: their files, the simulators that load them, and the tools that make them; no task, no reward.

Files: layout (procedural floor plans and their layout.json), glb (the scene mesh), semantic (object annotations),
dataset (habitat's PointNav episode JSON format, read by envs/habitat/ and envs/habitat_lab/), moves (the
(rank, worker) groups episodes are dealt to, and moving whole scenes between them during a run).
Simulators: interface (the simulator boundary), sim (habitat-sim; the only module importing it, lazily), gridsim
(a 2-D double of a generated floor plan, for tests), backends (one by name), geometry (rotations, agent frame).
Tools: scene_gen (procedural scenes), episode_gen (PointNav episodes on navmeshes), objectnav_gen (ObjectNav
episodes), each `python -m ddppo.envs.scenes.<tool>`.
Environments build on this package (envs/habitat/, envs/habitat_lab/); it never imports them. Nothing here imports
habitat_sim or torch at import time.
"""
