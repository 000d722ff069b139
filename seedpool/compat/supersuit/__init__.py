"""SuperSuit's API on seedpool's engine: `import seedpool.compat.supersuit as ss` is the one
line a SuperSuit script changes (see docs/compat.md, "Coming from SuperSuit").

- `pettingzoo_env_to_vec_env_v1(parallel_env)` and `concat_vec_envs_v1(vec_env, num_vec_envs,
  num_cpus=0, base_class="gymnasium" | "stable_baselines3")` build SuperSuit's vector envs on
  the engine: one row per agent of each env (env-major, `possible_agents` order), the envs
  copies of the one handed in (cloudpickle, as SuperSuit copies it; the env itself is never
  stepped), `num_cpus` 0 or 1 stepping them in this process and more in that many worker
  processes. Agents that leave before their env ends need no `black_death_v3` (rows.py).
  `gym_vec_env_v0` and `stable_baselines3_vec_env_v0` build seedpool's gymnasium and SB3
  vector envs of copies of a gymnasium env.
- SuperSuit's per-env wrappers (`color_reduction_v0`, `resize_v1`, `frame_stack_v1`,
  `black_death_v3`, ...) are SuperSuit's own, handed on from the installed package (the
  `multiagent` extra); envs they wrap run through the engine as any PettingZoo env does.
  So are `vectorize_aec_env_v0` (SuperSuit's AEC vector env: turn-based envs run on the
  engine through `seedpool.make` instead) and `stable_baselines_vec_env_v0` (SB2).
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable

try:
    import gymnasium as gym
    from pettingzoo.utils.env import ParallelEnv
except ImportError as err:  # the face is for PettingZoo envs: it needs PettingZoo
    raise ImportError(f"seedpool.compat.supersuit needs PettingZoo ({err}): pip install 'seedpool[multiagent]'") from err

from seedpool.compat.supersuit.copies import EnvCopies, pickled
from seedpool.compat.supersuit.vector import Source, SuperSuitVecEnv, engine_layout

EXTRA = "multiagent"

# SuperSuit's names the face hands on to the installed SuperSuit, by the module that holds them.
_HANDED_ON: dict[str, tuple[str, ...]] = {
    "supersuit.generic_wrappers": (
        "clip_actions_v0", "clip_reward_v0", "color_reduction_v0", "delay_observations_v0", "dtype_v0",
        "flatten_v0", "frame_skip_v0", "frame_stack_v1", "frame_stack_v2", "max_observation_v0", "nan_noop_v0",
        "nan_random_v0", "nan_zeros_v0", "normalize_obs_v0", "reshape_v0", "resize_v1", "scale_actions_v0",
        "sticky_actions_v0"),
    "supersuit.multiagent_wrappers": ("agent_indicator_v0", "black_death_v3", "pad_action_space_v0",
                                      "pad_observations_v0"),
    "supersuit.lambda_wrappers": ("action_lambda_v1", "observation_lambda_v0", "reward_lambda_v0"),
    "supersuit.aec_vector": ("vectorize_aec_env_v0",),
    "supersuit.vector.vector_constructors": ("stable_baselines_vec_env_v0",),
}
WRAPPERS = {name: home for home, names in _HANDED_ON.items() for name in names}


class DeprecatedWrapper(ImportError):
    """An older version of a name the face has (SuperSuit's error for it)."""


def pettingzoo_env_to_vec_env_v1(parallel_env: Any) -> SuperSuitVecEnv:
    """A PettingZoo ParallelEnv as a vector env of its agents (SuperSuit's MarkovVectorEnv):
    `num_envs` rows, one per possible agent. Its engine starts on first reset; handed to
    `concat_vec_envs_v1`, it never starts one."""
    assert isinstance(parallel_env, ParallelEnv), (
        "pettingzoo_env_to_vec_env takes in a pettingzoo ParallelEnv. Can create a parallel_env with "
        "pistonball.parallel_env() or convert it from an AEC env with `from pettingzoo.utils.conversions "
        "import aec_to_parallel; aec_to_parallel(env)``")
    assert hasattr(parallel_env, "possible_agents"), (
        "environment passed to pettingzoo_env_to_vec_env must have possible_agents attribute.")
    agents = parallel_env.possible_agents
    obs_space, act_space = parallel_env.observation_space(agents[0]), parallel_env.action_space(agents[0])
    assert all(obs_space == parallel_env.observation_space(a) for a in agents), (
        "observation spaces not consistent. Perhaps you should wrap with "
        "`supersuit.multiagent_wrappers.pad_observations_v0`?")
    assert all(act_space == parallel_env.action_space(a) for a in agents), (
        "action spaces not consistent. Perhaps you should wrap with "
        "`supersuit.multiagent_wrappers.pad_action_space_v0`?")
    return SuperSuitVecEnv(Source(parallel_env), build=False)


def concat_vec_envs_v1(vec_env: Any, num_vec_envs: int, num_cpus: int = 0, base_class: str = "gymnasium",
                       *, backend: str | None = None) -> Any:
    """`num_vec_envs` copies of `vec_env` (a `pettingzoo_env_to_vec_env_v1` vector, or a
    gymnasium env) as one vector env, rows env-major. `num_cpus`: 0 or 1 steps them in this
    process, more in that many worker processes. `base_class`: "gymnasium" (SuperSuit's
    gymnasium VectorEnv) or "stable_baselines3" (an SB3 VecEnv). `backend` (seedpool's, not
    SuperSuit's): the engine's backend instead of the one `num_cpus` picks."""
    if base_class not in ("gymnasium", "stable_baselines3"):
        if base_class == "stable_baselines":
            raise ValueError("base_class='stable_baselines' (SB2, TensorFlow 1) is not served on seedpool's engine: "
                             "use base_class='stable_baselines3'")
        raise ValueError("supersuit_vec_env only supports 'gymnasium', 'stable_baselines', and 'stable_baselines3' "
                         "for its base_class")
    if isinstance(getattr(vec_env, "source", None), Source):  # one of the face's own vector envs
        source, copies = vec_env.source, vec_env.source.copies * num_vec_envs
    elif isinstance(vec_env, gym.Env):
        source, copies = Source(vec_env), num_vec_envs
    else:
        raise TypeError(f"concat_vec_envs_v1 takes a vector env from pettingzoo_env_to_vec_env_v1 (or a gymnasium "
                        f"env), got {type(vec_env).__name__}: wrap a PettingZoo ParallelEnv with "
                        "pettingzoo_env_to_vec_env_v1 first")
    source = source.with_copies(copies, *engine_layout(copies, num_cpus, backend))
    if base_class == "gymnasium":
        return SuperSuitVecEnv(source)
    from seedpool.compat.supersuit.sb3 import SuperSuitSB3VecEnv

    return SuperSuitSB3VecEnv(source)


def gym_vec_env_v0(env: Any, num_envs: int, multiprocessing: bool = False) -> Any:
    """`num_envs` copies of a gymnasium env as seedpool's gymnasium VectorEnv (SuperSuit builds
    gymnasium's SyncVectorEnv, or AsyncVectorEnv with `multiprocessing`)."""
    from seedpool.envs.vector import make_vec

    return make_vec(_copies(env), num_envs=num_envs, backend="process" if multiprocessing else "serial")


def stable_baselines3_vec_env_v0(env: Any, num_envs: int, multiprocessing: bool = False) -> Any:
    """`num_envs` copies of a gymnasium env as seedpool's SB3 VecEnv (SuperSuit builds SB3's
    DummyVecEnv, or SubprocVecEnv with `multiprocessing`)."""
    from seedpool.compat.sb3 import make_sb3

    return make_sb3(_copies(env), num_envs=num_envs, backend="process" if multiprocessing else "serial")


def _copies(env: Any) -> Callable[[], Any]:
    return EnvCopies(pickled(env), type(env).__name__)


def __getattr__(name: str) -> Any:
    """SuperSuit's wrappers, from the installed SuperSuit; SuperSuit's error for an old version."""
    home = WRAPPERS.get(name)
    if home is not None:
        return _handed_on(name, home)
    versioned = re.fullmatch(r"(.*_v)(\d+)", name)
    if versioned:
        base, version = versioned.group(1), int(versioned.group(2))
        newer = [n for n in (*__all__, *WRAPPERS) if re.fullmatch(rf"{re.escape(base)}\d+", n)
                 and int(n[len(base):]) > version]
        if newer:
            raise DeprecatedWrapper(f"{name} is now deprecated, use {max(newer, key=lambda n: int(n[len(base):]))} "
                                    "instead")
    raise AttributeError(f"module 'seedpool.compat.supersuit' has no attribute {name!r}")


def _handed_on(name: str, home: str) -> Any:
    try:
        module = importlib.import_module(home)
    except ImportError as err:
        return _missing(name, err)
    return getattr(module, name)


def _missing(name: str, err: ImportError) -> Callable[..., Any]:
    """Stands in for a wrapper of a SuperSuit that is not installed: says so when called."""
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"{name} is SuperSuit's wrapper and SuperSuit is not installed ({err}): "
                          f"pip install 'seedpool[{EXTRA}]'")

    missing.__name__ = name
    return missing


def __dir__() -> list[str]:
    return sorted({*globals(), *WRAPPERS})


__all__ = ["pettingzoo_env_to_vec_env_v1", "concat_vec_envs_v1", "gym_vec_env_v0", "stable_baselines3_vec_env_v0",
           "SuperSuitVecEnv", "DeprecatedWrapper", *WRAPPERS]
