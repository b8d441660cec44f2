"""`ddppo export`: a ddppo run written in another trainer's format, an application beside train and eval.

cli.py (registers `export`; argparse only), habitat_baselines.py (habitat-baselines' ckpt.N.pth: the payload
its trainer writes, the key layout of the installed release). Reading other trainers' files, and the one key
mapping, stay in the infrastructure (ddppo/interop/), which checkpoint loading needs too.
"""
