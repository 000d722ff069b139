"""mpe2's multi-agent particle tasks as native multi-agent families: simple_spread_v3 and
simple_tag_v3, all envs and agents of a pool stepped in one numba call (kernels.py), with the
episodes mpe2 gives for the same seeds and actions (tests/test_mpe_native.py)."""

from seedpool.envs.families.mpe.spread import SimpleSpread
from seedpool.envs.families.mpe.tag import SimpleTag

NATIVE = {"simple_spread_v3": SimpleSpread, "simple_tag_v3": SimpleTag}

__all__ = ["NATIVE", "SimpleSpread", "SimpleTag"]
