"""Adapters that present the engine through other RL libraries' env APIs.

Each adapter lives in its own module and imports its library only when that module is
imported (`seedpool.make_sb3` loads `seedpool.compat.sb3` on first use), so a user without
the library pays nothing for it.
"""
