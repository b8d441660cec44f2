"""What is learnt: success or return over seeds (variants, memory cores, BC -> RL, imitation), env steps to a threshold
(rollout modes, VER's rules), what preemption does to the slow scenes' share."""
