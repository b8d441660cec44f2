"""What a step, an update or a save costs: env, rollout and training fps, time per phase (precision, encoders, memory
cores, the reward model, the learner), checkpoint I/O, storage bytes, the preemption check, scaling over ranks."""
