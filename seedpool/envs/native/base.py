"""`NativeEnv`: a family of envs that steps all of its envs in one call, on arrays.

A native family holds the state of `num_envs` envs in arrays and answers two calls, each
for a set of rows: `reset(ids, options)` and `step(ids, actions)`. The engine does the
rest, exactly as for Python envs: seeds, the time limit, `elapsed_step`, episode returns,
autoreset (next_step, same_step, disabled), validation of actions and the pool API.

`ids` is anything NumPy accepts as a row index: a slice (all envs, or a contiguous run of
them: views, no copies) or an int64 array of env ids. Write the family with
`self.state[..., ids]`-style indexing and both work.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

Rows = Union[slice, np.ndarray]


def select_rows(ids: Sequence[int], num_envs: int) -> Rows:
    """Distinct env ids as rows: a slice for every env or a contiguous run of them (views, no
    gathers), in any order, else an int64 array."""
    k = len(ids)
    if k == num_envs:
        return slice(None)
    lo, hi = min(ids), max(ids)
    if hi - lo == k - 1:  # distinct ids (the pool checks) spanning k rows: that run
        return slice(lo, hi + 1)
    return np.asarray(ids, dtype=np.int64)


def state_attributes(reference: gym.Env) -> frozenset[str]:
    """The attributes a gymnasium env sets or changes while it resets and steps (its state),
    found by running a copy of it: those a view must not answer from the reference."""
    env = type(reference)(**getattr(reference, "_init_kwargs", {}))
    before = {k: repr(v) for k, v in vars(env).items()}
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    after = {k: repr(v) for k, v in vars(env).items()}
    env.close()
    return frozenset(k for k in after if before.get(k) != after[k])


class NativeEnv:
    """Base class of vector-native env families (see docs/engine.md).

    A subclass sets `single_observation_space` and `single_action_space` (a Box, Discrete,
    MultiDiscrete or MultiBinary observation space: one array row per env; or a Dict or
    Tuple of them, whose batches are dicts or tuples of such arrays) in `__init__`, and
    implements `reset` and `step`. `self.rng(i)` is env i's own random generator,
    seeded by the engine exactly as gymnasium seeds a single env (`reset(seed=...)`), so a
    family that draws env i's random numbers from it, in the single env's order, repeats
    the single env's episodes.
    """

    single_observation_space: gym.Space
    single_action_space: gym.Space
    max_episode_steps: int | None = None  # the engine's default time limit for this family
    # True when `step` draws no random numbers and keeps no state that `reset` does not
    # overwrite: the engine may then step every row of a batch, including envs it resets on
    # this very step (their results are replaced), which spares it a gather of the rows.
    pure_step: bool = False
    metadata: dict[str, Any] = {}
    # The smallest pool that `make(..., native=None)` makes native: below it, the Python-env
    # path measured faster (benchmarks/results/native_crossover.md). A class given as the task
    # is always native.
    native_from: int = 1
    # The smallest batch from which `step_autoreset`, split over two threads, measured faster
    # than one thread (benchmarks/results/native_split.md); None: never split. Set it only
    # where `step_autoreset` releases the GIL (numba's nogil) and touches env i's data alone.
    split_from: int | None = None
    # Options of the family's own (how it computes), which its single-env version does not take.
    native_options: tuple[str, ...] = ()
    # The single env this family reproduces, built once (classic control sets it): per-env calls
    # (get_attr, make_vec's `call`) read its constant attributes. None: they raise instead.
    reference: gym.Env | None = None

    def __init__(self, num_envs: int):
        """Call it first in a subclass's `__init__`."""
        self.num_envs = num_envs
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        self._seeds: list[int | None] = [None] * num_envs
        self._state_names: frozenset[str] | None = None

    def seed(self, i: int, seed: int | None) -> None:
        """Give env i a new generator from `seed` (gymnasium's `Env.reset(seed=seed)`)."""
        self._rngs[i], self._seeds[i] = seeding.np_random(seed)

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator; an unseeded one on first use, as a gymnasium env's `np_random`."""
        rng = self._rngs[i]
        if rng is None:
            self.seed(i, None)
            rng = self._rngs[i]
        return rng

    def seed_of(self, i: int) -> int | None:
        """The seed of env i's generator (drawn from entropy when it was unseeded), or None
        before it has one."""
        return self._seeds[i]

    def state_names(self) -> frozenset[str]:
        """Attributes of `reference` that are per-env state (a view must not read them)."""
        if self._state_names is None:
            self._state_names = state_attributes(self.reference) if self.reference is not None else frozenset()
        return self._state_names

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        """Start a new episode in envs `ids` (an int64 array); return their observations,
        one row per id. `options`: None, or one reset-options dict (or None) per id."""
        raise NotImplementedError

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step envs `ids` with `actions` (one row per env); return (obs, reward, terminated),
        each with one row per env. Truncation at the time limit is the engine's."""
        raise NotImplementedError

    def background_lanes(self, batch_size: int) -> tuple[np.ndarray, str] | None:
        """For an async pool of batches of `batch_size`: each env's lane (an int array) and
        why. Lane 0's parts of a batch are stepped by the caller when the pool waits, each
        other lane's by a thread of its own as soon as they are sent, while the caller handles
        other batches (background.py); None (the default): a batch is stepped in the calling
        thread when the pool waits for it. Return lanes only if `step` and `reset` of
        envs of different lanes may run at once from different threads (no state shared
        between lanes) and release the GIL for most of their time. Called once, before the
        first reset: a family may arrange its envs for it."""
        return None

    # With `background_lanes`: True when any thread may step any env (no state shared between
    # envs, none tied to a thread): a batch's parts then go to whichever lane is free.
    background_shared: bool = False

    def own_threads(self) -> tuple[int, str] | None:
        """The threads the family splits its own `step` over, and why (what `pool.num_workers`
        and `pool.layout_reason` report); None (the default): it has no split of its own, and
        the engine's (`split_from`) applies."""
        return None

    def can_fuse(self) -> bool:
        """Whether `step_autoreset` can step the family now (the default: never)."""
        return False

    def step_autoreset(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray,
                       book: Any) -> None:
        """Optional, for speed: step envs `rows` (int64) in one compiled call that also does
        the engine's bookkeeping and autoreset, through `bookkeeping.end_step` and `started`
        (`book`: a `bookkeeping.Book`). `actions`, `obs` and `final_obs` (same_step
        autoreset; empty otherwise) are the pool's whole buffers: row i is env i's. An env
        with `book.needs_reset[i]` set is reset (no options) instead of stepped. On entry row i
        of `obs` holds env i's latest observation (the engine writes every row it returns from
        `step`, `reset` and this call), so a family may update just the cells that change.

        The engine calls it when `can_fuse()` says so and no env of the batch has reset
        options waiting or a fault to report; otherwise it calls `step` and `reset`. With
        `split_from` set, it calls it from several threads at once on disjoint rows."""
        raise NotImplementedError

    def compiled_step(self, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray, book: Any) -> Any:
        """Optional, for speed, with `background_shared` and `step_autoreset`: a
        `part_ring.CompiledStep` (a compiled loop that claims and steps parts of batches from
        a ring without the GIL, on these buffers of the pool's, and the Python half of the
        fused step) for an async pool's batches; None (the default): background.py's threads
        step the parts through `step_autoreset`. Used where `step_autoreset` would be."""
        return None

    def close(self) -> None:
        """Release what the family holds (nothing, by default)."""


def reset_options(options: Sequence[dict | None] | None, k: int) -> dict | None:
    """The options of the k-th env of a reset (None when there are none)."""
    return None if options is None else options[k]
