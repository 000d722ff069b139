"""seedpool: fast deep RL — an EnvPool-class engine for any Gymnasium env, central inference, PPO and IMPALA."""

from seedpool.envs import *  # noqa: F403 - the engine's names are the package's
from seedpool.envs import __all__ as _ENGINE_NAMES
from seedpool.envs.vector import make_vec

__version__ = "0.1.0"
__all__ = [*_ENGINE_NAMES, "make_vec", "build_run", "load_run", "__version__"]


def __getattr__(name: str) -> object:
    """`make_sb3` and `install_as_envpool` load on first use: importing seedpool imports neither
    Stable-Baselines3 nor dm_env."""
    if name == "install_as_envpool":  # EnvPool's API under `import envpool` (compat/envpool)
        from seedpool.compat.envpool.install import install_as_envpool

        return install_as_envpool
    if name in ("build_run", "load_run"):  # runs as objects (seedpool/runs.py): torch loads with them
        from seedpool import runs

        return getattr(runs, name)
    if name == "make_sb3":
        from seedpool.compat.sb3 import make_sb3

        return make_sb3
    raise AttributeError(f"module 'seedpool' has no attribute {name!r}")
