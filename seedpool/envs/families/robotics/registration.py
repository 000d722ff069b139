"""EnvPool's Gymnasium-Robotics ids ("FetchReach-v4", "HandManipulateBlock-v1",
"AdroitHandDoor-v1", "PointMaze_UMaze-v3", "FrankaKitchen-v1", ...): a Python-env family
over the gymnasium-robotics package (listed without it installed, so that a missing
package is reported with its extra). MuJoCo steps through Python bindings that hold the
GIL between calls, so the family prefers processes.
"""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="robotics",
    ids="seedpool.envs.families.robotics.env:robotics_ids",
    factory="seedpool.envs.families.robotics.env:make_robotics",
    time_limit_option="max_episode_steps",
))
