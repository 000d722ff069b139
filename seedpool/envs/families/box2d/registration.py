"""EnvPool's Box2D ids that gymnasium 1.x no longer registers ("CarRacing-v2",
"LunarLander-v2", "LunarLanderContinuous-v2"): a Python-env family building gymnasium's
current version of each. EnvPool's other Box2D ids (BipedalWalker-v3, CarRacing-v3, ...)
are gymnasium's own and take gymnasium's path.
"""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="box2d",
    ids="seedpool.envs.families.box2d.env:box2d_ids",
    factory="seedpool.envs.families.box2d.env:make_box2d",
    time_limit_option="max_episode_steps",
))
