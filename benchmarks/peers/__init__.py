"""ddppo side by side with another trainer or library, on the same task and budget: stable-baselines3 (CartPole,
MuJoCo, Atari, MiniGrid), habitat-baselines' DD-PPO and VER, habitat-lab's own evaluation loop."""
