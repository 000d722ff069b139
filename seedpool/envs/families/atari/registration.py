"""EnvPool-style Atari ids ("Pong-v5", ...): a Python-env family (ale-py holds the GIL)."""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="atari",
    ids="seedpool.envs.families.atari.factory:atari_ids",
    factory="seedpool.envs.families.atari.factory:make_atari",
    time_limit_option="max_episode_steps",
))
