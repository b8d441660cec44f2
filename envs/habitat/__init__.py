"""habitat-sim PointNav: task, metrics, dataset format, scene and episode generators.

Modules: options (env.habitat.* config), interface (the simulator boundary),
sim (habitat-sim; the only module importing it, lazily), gridsim (a 2-D double
for tests), geometry, task (reward, success, SPL), dataset (habitat's PointNav
JSON format), env (the VecEnv), follower (shortest-path expert), layout + glb +
scene_gen (procedural scenes), episode_gen (episodes on navmeshes).
Nothing here imports habitat_sim or torch at import time.
"""
