"""EnvPool's MiniGrid and BabyAI ids ("MiniGrid-DoorKey-8x8-v0", "BabyAI-GoToLocal-v0", ...)
on the Python-env path: the `minigrid` package's envs with EnvPool's observations (layout.py).

The ids are EnvPool 1.2.5's 177, all of which the package registers under the same names
with the same `max_steps`. They are listed without minigrid installed, so that a missing
package is reported with the extra to install rather than as an unknown gymnasium id; the
native ids (registration.py) need no package at all.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from seedpool.errors import UnknownEnvError

INSTALL_HINT = "pip install 'seedpool[minigrid]'"
MISSION_BYTES = {"MiniGrid": 96, "BabyAI": 512}  # EnvPool's mission buffer, by id prefix


def _sizes(pattern: str, sizes: tuple[Any, ...]) -> list[str]:
    return [pattern.format(s) for s in sizes]


MINIGRID_IDS = (
    *_sizes("Empty-{0}x{0}", (5, 6, 8, 16)), *_sizes("Empty-Random-{0}x{0}", (5, 6)),
    *_sizes("DoorKey-{0}x{0}", (5, 6, 8, 16)), "DistShift1", "DistShift2",
    *_sizes("LavaCrossing{}", ("S9N1", "S9N2", "S9N3", "S11N5")),
    *_sizes("SimpleCrossing{}", ("S9N1", "S9N2", "S9N3", "S11N5")), *_sizes("LavaGapS{}", (5, 6, 7)),
    *_sizes("Dynamic-Obstacles-{0}x{0}", (5, 6, 8, 16)), *_sizes("Dynamic-Obstacles-Random-{0}x{0}", (5, 6)),
    "Fetch-5x5-N2", "Fetch-6x6-N2", "Fetch-8x8-N3", "FourRooms", *_sizes("GoToDoor-{0}x{0}", (5, 6, 8)),
    "GoToObject-6x6-N2", "GoToObject-8x8-N2",
    *_sizes("KeyCorridor{}", ("S3R1", "S3R2", "S3R3", "S4R3", "S5R3", "S6R3")), "LockedRoom",
    *_sizes("Memory{}", ("S17Random", "S13Random", "S13", "S11", "S9", "S7")),
    "MultiRoom-N2-S4", "MultiRoom-N4-S5", "MultiRoom-N6",
    *_sizes("ObstructedMaze-{}-v0", ("1Dl", "1Dlh", "1Dlhb", "2Dl", "2Dlh", "2Dlhb", "1Q", "2Q", "Full")),
    *_sizes("ObstructedMaze-{}-v1", ("2Dlhb", "1Q", "2Q", "Full")),
    "Playground", "PutNear-6x6-N2", "PutNear-8x8-N3", "RedBlueDoors-6x6", "RedBlueDoors-8x8", "Unlock",
    "UnlockPickup", "BlockedUnlockPickup",
    *_sizes("WFC-{}", ("MazeSimple", "DungeonMazeScaled", "RoomsFabric", "ObstaclesBlackdots", "ObstaclesAngular",
                       "ObstaclesHogs3")),
)
BABYAI_IDS = (
    "ActionObjDoor", "BlockedUnlockPickup", "BossLevel", "BossLevelNoUnlock", *_sizes("FindObjS{}", (5, 6, 7)),
    "GoTo", "GoToOpen", "GoToObjMaze", "GoToObjMazeOpen", *_sizes("GoToObjMaze{}", ("S4", "S4R2", "S5", "S6", "S7")),
    "GoToDoor", "GoToImpUnlock", "GoToLocal",
    *_sizes("GoToLocal{}", ("S5N2", "S6N2", "S6N3", "S6N4", "S7N4", "S7N5", "S8N2", "S8N3", "S8N4", "S8N5", "S8N6",
                            "S8N7")),
    "GoToObj", "GoToObjS4", "GoToObjS6-v1", "GoToObjDoor", "GoToRedBall", "GoToRedBallGrey", "GoToRedBallNoDists",
    "GoToRedBlueBall", "GoToSeq", "GoToSeqS5R2", "KeyCorridor",
    *_sizes("KeyCorridor{}", ("S3R1", "S3R2", "S3R3", "S4R3", "S5R3", "S6R3")), "KeyInBox", "MiniBossLevel",
    "MoveTwoAcrossS5N2", "MoveTwoAcrossS8N9", *_sizes("OneRoomS{}", (8, 12, 16, 20)), "Open", "OpenDoor",
    "OpenDoorColor", "OpenDoorDebug", "OpenDoorLoc", "OpenDoorsOrderN2", "OpenDoorsOrderN2Debug", "OpenDoorsOrderN4",
    "OpenDoorsOrderN4Debug", "OpenRedBlueDoors", "OpenRedBlueDoorsDebug", "OpenRedDoor", "OpenTwoDoors", "Pickup",
    "PickupAbove", "PickupDist", "PickupDistDebug", "PickupLoc", "PutNextLocal", "PutNextLocalS5N3",
    "PutNextLocalS6N4", *_sizes("PutNext{}", ("S4N1", "S5N1", "S5N2", "S5N2Carrying", "S6N3", "S6N3Carrying", "S7N4",
                                              "S7N4Carrying")),
    "Synth", "SynthLoc", "SynthS5R2", "SynthSeq", "UnblockPickup", "Unlock", "UnlockLocal", "UnlockLocalDist",
    "UnlockPickup", "UnlockPickupDist", "UnlockToUnlock",
)


def _full(prefix: str, name: str) -> str:
    return f"{prefix}-{name}" if name.endswith(("-v0", "-v1")) else f"{prefix}-{name}-v0"


IDS = tuple(_full("MiniGrid", n) for n in MINIGRID_IDS) + tuple(_full("BabyAI", n) for n in BABYAI_IDS)


def minigrid_ids() -> list[str]:
    """EnvPool's MiniGrid and BabyAI ids; needs no minigrid install."""
    return sorted(IDS)


def make_minigrid(task_id: str, *, mission_bytes: int | None = None, **options: Any) -> gym.Env:
    """The `minigrid` package's env of an EnvPool id, with EnvPool's observations.

    `options` go to the package's env (`max_steps`, which `make(..., max_episode_steps=)`
    sets, `agent_view_size`, `size`, `num_dists`, `render_mode`, ...); `mission_bytes` is
    EnvPool's: the length of the mission buffer (96 for MiniGrid ids, 512 for BabyAI's).
    """
    if task_id not in IDS:
        raise UnknownEnvError(f"unknown MiniGrid task id {task_id!r}; ids are {minigrid_ids()}")
    try:
        import minigrid  # noqa: F401 - registers its gymnasium ids
    except ImportError as err:
        raise ModuleNotFoundError(f"{task_id} needs the minigrid package, which is not installed: "
                                  f"{INSTALL_HINT} [{err}]", name="minigrid") from err
    from seedpool.envs.families.minigrid.layout import EnvPoolLayout

    if mission_bytes is None:
        mission_bytes = MISSION_BYTES[task_id.partition("-")[0]]
    env = gym.make(task_id, disable_env_checker=True, **options).unwrapped
    return EnvPoolLayout(env, int(mission_bytes))
