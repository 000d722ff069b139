"""Native MiniGrid: Empty, DoorKey and BabyAI's GoToLocal, every env of a pool in one call.

Each family keeps its envs' worlds in arrays (kernels.py) and builds levels with the draws
the `minigrid` package (3.2) makes, from each env's own gymnasium generator (rng.py): the
same seeds and actions give the package's episodes (tests/test_minigrid.py compares them).
Observations are EnvPool's: a Dict of `direction` (int32), `image` (uint8 [V, V, 3], the
package's encoding) and `mission` (the mission's UTF-8 bytes, zero-padded). The `minigrid`
package is not needed.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from seedpool.envs.families.minigrid import kernels
from seedpool.envs.families.minigrid import levels as lv
from seedpool.envs.families.minigrid import rng as mg_rng
from seedpool.envs.families.minigrid.layout import observation_space
from seedpool.envs.families.minigrid.registration import GOTO_LOCAL_VARIANTS
from seedpool.envs.native.base import NativeEnv, Rows

# GoToLocal tracks at most this many cells of its target (one per object of the level).
MAX_TARGETS = 32


class MiniGridFamily(NativeEnv):
    """One MiniGrid level, `num_envs` at once; a subclass per id sets the level's constants.

    Options are EnvPool's: `agent_view_size` (7) and `mission_bytes` (the mission's buffer).
    The pool's time limit (`max_episode_steps`, 4 * size**2 for Empty, ...) is MiniGrid's
    `max_steps`, which the reward reads, as in EnvPool.
    """

    level: int  # levels.EMPTY_LEVEL, ...
    width: int
    height: int
    start: tuple[int, int, int] = (-1, -1, -1)  # the agent's x, y and direction; (-1, ...): random
    num_dists = 0  # GoToLocal's objects
    see_through_walls = False
    mission_text = ""  # the level's one mission ("": drawn with the level)
    default_mission_bytes = 96  # EnvPool's: 96 for MiniGrid ids, 512 for BabyAI's
    pure_step = True  # a step draws nothing, and a reset rewrites all that a step changes
    metadata = {"render_fps": 10}

    def __init__(self, num_envs: int, agent_view_size: int = 7, mission_bytes: int | None = None):
        super().__init__(num_envs)
        if agent_view_size < 3 or agent_view_size % 2 == 0:
            raise ValueError(f"agent_view_size must be odd and at least 3 (MiniGrid's), got {agent_view_size}")
        mission_bytes = self.default_mission_bytes if mission_bytes is None else int(mission_bytes)
        if mission_bytes < 1:
            raise ValueError(f"mission_bytes must be positive, got {mission_bytes}")
        self.single_observation_space = observation_space(agent_view_size, mission_bytes)
        self.single_action_space = gym.spaces.Discrete(7)
        x, y, d = self.start
        self.cfg = np.array([self.level, x, y, d, self.num_dists, int(self.see_through_walls)], np.int64)
        n = num_envs
        self.grid = np.zeros((n, self.width, self.height, 3), np.uint8)
        self.agent = np.zeros((n, 3), np.int64)
        self.carry = np.zeros((n, 3), np.uint8)
        self.steps = np.zeros(n, np.int64)
        self.target = np.zeros((n, 2), np.int64)
        self.poss = np.zeros((n, MAX_TARGETS, 2), np.int64)
        self.npos = np.zeros(n, np.int64)
        self.missions = np.zeros((n, mission_bytes), np.uint8)
        text = np.frombuffer(self.mission_text.encode(), np.uint8)[:mission_bytes]
        self.missions[:, : len(text)] = text
        self.states = np.zeros((n, mg_rng.WIDTH), np.uint64)  # each env's generator, for the kernels
        self.has_rng = np.zeros(n, np.bool_)
        self.all_seeded = False
        self._lent: set[int] = set()  # envs whose generator Python holds: reloaded before kernels draw
        self._rows = np.arange(n)
        self._leaves: dict[int, tuple[np.ndarray, ...]] = {}

    # -- generators --------------------------------------------------------------------
    def seed(self, i: int, seed: int | None) -> None:
        """As NativeEnv's; the kernels then draw from a copy of the generator's state."""
        super().seed(i, seed)
        mg_rng.load(self.states, i, self._rngs[i])
        self._lent.discard(i)
        self.has_rng[i] = True
        self.all_seeded = self.all_seeded or bool(self.has_rng.all())

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator, brought up to the kernels' draws; what Python draws from it
        counts too (it is copied back before the kernels draw next)."""
        if not self.has_rng[i]:
            self.seed(i, None)
        generator = self._rngs[i]
        mg_rng.store(self.states, i, generator)
        self._lent.add(i)
        return generator

    def _take_back(self) -> None:
        for i in self._lent:
            mg_rng.load(self.states, i, self._rngs[i])
        self._lent.clear()

    # -- the NativeEnv calls -------------------------------------------------------------
    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> dict[str, np.ndarray]:
        if not self.all_seeded:
            for i in ids[~self.has_rng[ids]].tolist():  # never seeded: fresh entropy, as gymnasium
                self.seed(i, None)
        if self._lent:
            self._take_back()
        obs = self._empty_obs(len(ids))
        kernels.reset_rows(np.asarray(ids, np.int64), self.cfg, self.grid, self.agent, self.carry, self.steps,
                           self.target, self.poss, self.npos, self.states, self.missions, obs["direction"],
                           obs["image"], obs["mission"])
        return obs

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        rows = self._rows[ids]
        n = len(rows)
        obs = self._empty_obs(n)
        reward = np.zeros(n, np.float64)
        terminated = np.zeros(n, np.bool_)
        kernels.step_rows(rows, np.asarray(actions, np.int64), self.cfg, int(self.max_episode_steps), self.grid,
                          self.agent, self.carry, self.steps, self.target, self.poss, self.npos, self.missions,
                          obs["direction"], obs["image"], obs["mission"], reward, terminated)
        return obs, reward, terminated

    def can_fuse(self) -> bool:
        """The fused kernel, once every env has its generator (the first reset gives them)."""
        return self.all_seeded

    def step_autoreset(self, rows: np.ndarray, actions: np.ndarray, obs: Any, final_obs: Any, book: Any) -> None:
        """NativeEnv's fused step: one numba call (kernels.fused) on the pool's Dict buffers."""
        if self._lent:
            self._take_back()
        kernels.fused(rows, actions, self.cfg, self.grid, self.agent, self.carry, self.steps, self.target, self.poss,
                      self.npos, self.states, self.missions, *self._arrays(obs), *self._arrays(final_obs), *book)

    def _empty_obs(self, n: int) -> dict[str, np.ndarray]:
        view, mission_bytes = self.single_observation_space["image"].shape[0], self.missions.shape[1]
        return {"direction": np.zeros(n, np.int32), "image": np.zeros((n, view, view, 3), np.uint8),
                "mission": np.zeros((n, mission_bytes), np.uint8)}

    def _arrays(self, tree: Any) -> tuple[np.ndarray, ...]:
        """(direction, image, mission) of an observation buffer: the pool's (a `Nested`: one
        array per key) or a dict of arrays."""
        key = id(tree)
        found = self._leaves.get(key)
        if found is None or found[3] is not tree:
            items = tree.items() if isinstance(tree, dict) else ((p[0], a) for p, a in zip(tree.paths, tree.arrays))
            leaves = dict(items)
            found = (leaves["direction"], leaves["image"], leaves["mission"], tree)
            self._leaves[key] = found
        return found[:3]


class Empty(MiniGridFamily):
    """MiniGrid-Empty-8x8-v0: an empty room, the goal in the far corner (EmptyEnv)."""

    level = lv.EMPTY_LEVEL
    width = height = 8
    start = (1, 1, 0)
    see_through_walls = True
    mission_text = "get to the green goal square"
    max_episode_steps = 4 * 8**2


class DoorKey(MiniGridFamily):
    """MiniGrid-DoorKey-8x8-v0: a key to pick up, a locked door, the goal behind it (DoorKeyEnv)."""

    level = lv.DOORKEY_LEVEL
    width = height = 8
    mission_text = "use the key to open the door and then get to the goal"
    max_episode_steps = 10 * 8**2


class GoToLocal(MiniGridFamily):
    """BabyAI-GoToLocal-v0: go to the object the mission names, in one room of 8 distractors."""

    level = lv.GOTO_LOCAL_LEVEL
    width = height = 8  # room_size 8, one room
    num_dists = 8
    default_mission_bytes = 512
    max_episode_steps = 8**2  # RoomGridLevel: one navigation of room_size**2 steps


def _variant(base: type[MiniGridFamily], name: str, doc: str, **constants: Any) -> type[MiniGridFamily]:
    """A subclass of `base` for another id of its level: other sizes, starts or distractors."""
    return type(name, (base,), {"__doc__": doc, "__module__": __name__, "__qualname__": name, **constants})


def _room(size: int, steps_per_cell: int) -> dict[str, int]:
    return {"width": size, "height": size, "max_episode_steps": steps_per_cell * size**2}


Empty5x5 = _variant(Empty, "Empty5x5", "MiniGrid-Empty-5x5-v0.", **_room(5, 4))
Empty6x6 = _variant(Empty, "Empty6x6", "MiniGrid-Empty-6x6-v0.", **_room(6, 4))
Empty16x16 = _variant(Empty, "Empty16x16", "MiniGrid-Empty-16x16-v0.", **_room(16, 4))
EmptyRandom5x5 = _variant(Empty, "EmptyRandom5x5", "MiniGrid-Empty-Random-5x5-v0: a random start.",
                          start=(-1, -1, -1), **_room(5, 4))
EmptyRandom6x6 = _variant(Empty, "EmptyRandom6x6", "MiniGrid-Empty-Random-6x6-v0: a random start.",
                          start=(-1, -1, -1), **_room(6, 4))
DoorKey5x5 = _variant(DoorKey, "DoorKey5x5", "MiniGrid-DoorKey-5x5-v0.", **_room(5, 10))
DoorKey6x6 = _variant(DoorKey, "DoorKey6x6", "MiniGrid-DoorKey-6x6-v0.", **_room(6, 10))
DoorKey16x16 = _variant(DoorKey, "DoorKey16x16", "MiniGrid-DoorKey-16x16-v0.", **_room(16, 10))
# BabyAI-GoToLocalS{size}N{distractors}-v0: one class per variant, named as registration.py names them.
for _variant_name in GOTO_LOCAL_VARIANTS:
    _size, _dists = (int(n) for n in _variant_name[1:].split("N"))
    globals()[f"GoToLocal{_variant_name}"] = _variant(GoToLocal, f"GoToLocal{_variant_name}",
                                                      f"BabyAI-GoToLocal{_variant_name}-v0.", num_dists=_dists,
                                                      **_room(_size, 1))
