"""MinAtar's ids ("MinAtar/Breakout-v1", ...): native games, and the `minatar` package's
games on the Python-env path (`native=False`).

The Python-env family is listed without minatar installed (the ids need no import), so a
missing package is reported by the factory with the install command, not as an unknown
gymnasium id. Its pure-Python steps hold the GIL but cost only microseconds: the engine's
auto layout measures them (serial for small batches, processes for large), as for CartPole.
"""

from seedpool.envs.families.minatar.factory import GAMES, VERSIONS
from seedpool.envs.registry import Family, register_family, register_native

register_family(Family(
    name="minatar",
    ids="seedpool.envs.families.minatar.factory:minatar_ids",
    factory="seedpool.envs.families.minatar.factory:make_minatar",
    prefer_processes=False,
))
# -v1: the game's minimal action set; -v0: all six actions (the AllActions classes).
for _game in GAMES:
    for _version, _minimal in VERSIONS.items():
        register_native(f"MinAtar/{_game}-{_version}",
                        f"seedpool.envs.families.minatar.{_game.lower()}:{_game}{'' if _minimal else 'AllActions'}")
