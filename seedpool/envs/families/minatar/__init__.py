"""MinAtar (Young & Tian 2019): five miniature Atari games on 10x10 grids, channels first.

Two paths under the same ids. Native (the default): each game in numba, every env of a
pool in one call, the `minatar` package not needed (family.py, kernels.py, one module per
game, rng.py). Python-env (`native=False`): the package's own games wrapped as gymnasium
envs (factory.py, env.py). Importing this package does not import ``minatar``: the ids are
known without it, and building a Python env without it installed says how to install it.
"""

from .factory import make_minatar, minatar_ids

__all__ = ["make_minatar", "minatar_ids"]
