"""EnvPool's ids that no gymnasium registration builds as EnvPool does: its aliases, its own
toy tasks and its MuJoCo v2/v3 ids (table.py), for `seedpool.make` and the EnvPool face alike.
Engine code: it imports neither `make` nor the face."""

from seedpool.envs.registry import Family

_TABLE = "seedpool.envs.envpool_ids.table"


def envpool_family(name: str, ids: str) -> Family:
    """A Python-env family of the EnvPool ids that table.py's function ``ids`` lists, each built by
    its `make_task`, which counts EnvPool's time limit itself; stepped in this process by default
    (these envs are light)."""
    return Family(name=name, ids=f"{_TABLE}:{ids}", factory=f"{_TABLE}:make_task", prefer_processes=False,
                  time_limit_option="max_episode_steps")
