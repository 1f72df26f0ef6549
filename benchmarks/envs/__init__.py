"""The events build and the environments (envs/): beliefs, exposure, tool steps, world mode, and whether
the environment rewards evidence (acceptance, reader_trials).
"""
