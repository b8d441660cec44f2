"""habitat-sim PointNav: task, metrics, dataset format, scene and episode generators.

Modules: options (env.habitat.* config), interface (the simulator boundary),
sim (habitat-sim; the only module importing it, lazily), backends (which
simulator a config asks for: habitat-sim or the grid double), gridsim (a 2-D
double for tests), geometry, task (reward, success, SPL), dataset (habitat's
PointNav JSON format), env (the VecEnv), follower (shortest-path expert),
layout + glb + scene_gen (procedural scenes), semantic (their semantic
annotations), episode_gen (PointNav episodes on navmeshes), objectnav_gen
(ObjectNav episodes), check (`python -m ddppo.envs.habitat.check`: does
habitat-sim work here).
Nothing here imports habitat_sim or torch at import time.
"""
