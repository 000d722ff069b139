"""MiniGrid and BabyAI (Chevalier-Boisvert et al.) under EnvPool's ids, options and observations.

Two paths under the same ids. Native (the default where there is one: Empty, DoorKey and
GoToLocal, every size): the levels in numba, every env of a pool in one call, the `minigrid`
package not needed, the package's episodes for the same seeds (family.py, kernels.py,
levels.py, grid.py, rng.py). Python-env (`native=False`, and every other id): the package's
own envs with EnvPool's observations (factory.py, layout.py). Importing this package does
not import ``minigrid``. Ids the package registers in gymnasium stay reachable as
``"minigrid:MiniGrid-Empty-5x5-v0"``: the package's env as it is (docs/compat.md).
"""

from .factory import make_minigrid, minigrid_ids
from .layout import decode_mission

__all__ = ["decode_mission", "make_minigrid", "minigrid_ids"]
