"""MinAtar (Young & Tian 2019): five miniature Atari games on 10x10 grids, channels first.

Importing this package does not import ``minatar``: the ids are known without it, and
building an env without it installed says how to install it.
"""

from .registration import minatar_ids, make_minatar

__all__ = ["make_minatar", "minatar_ids"]
