"""`seedpool.install_as_envpool()`: make `import envpool` resolve to seedpool.

Libraries ship EnvPool integrations that run `import envpool` themselves, so `import
seedpool as envpool` in a user's script does not reach them. This puts seedpool's
EnvPool-API package (seedpool/compat/envpool) in `sys.modules` under EnvPool's module names:
`envpool`, `envpool.registration`, `envpool.python.envpool` (EnvPoolMixin),
`envpool.python.protocol`, and `envpool.<family>.registration` for the families whose tasks
seedpool builds (importing those registers nothing more: the ids are known already).
"""

from __future__ import annotations

import sys
import types

import gymnasium as gym

from seedpool.compat.envpool.tasks import MUJOCO

# EnvPool's family packages whose tasks seedpool builds (Atari itself, the others through
# gymnasium), as `import envpool.<family>.registration` names them.
FAMILIES = ("atari", "classic_control", "toy_text", "box2d", "mujoco", "mujoco.gym", "mujoco.dmc", "mujoco.robotics",
            "highway", "vizdoom")


def install_as_envpool(quiet: bool = False) -> types.ModuleType:
    """Make `import envpool` (and EnvPool's submodules that libraries import) give seedpool's
    EnvPool API; returns that module. Call it before importing the library. Refuses where
    the real envpool is already imported: objects made from it would stay EnvPool's."""
    try:
        import dm_env  # noqa: F401 - make_dm and the specs are built on it
    except ImportError as err:
        raise ImportError("install_as_envpool() needs dm-env (EnvPool's make_dm API): "
                          "pip install 'seedpool[envpool-api]'") from err
    import seedpool.compat.envpool as shim
    from seedpool.compat.envpool import registration
    from seedpool.compat.envpool import python as python_pkg
    from seedpool.compat.envpool.python import envpool as mixin
    from seedpool.compat.envpool.python import protocol

    current = sys.modules.get("envpool")
    if current is shim:
        return shim
    if current is not None:
        raise RuntimeError(
            f"the real envpool is already imported in this process ({getattr(current, '__file__', current)}): "
            "call seedpool.install_as_envpool() first, before anything imports envpool (or the "
            "library that does), in a fresh process")
    modules: dict[str, types.ModuleType] = {
        "envpool": shim,
        "envpool.registration": registration,
        "envpool.python": python_pkg,
        "envpool.python.envpool": mixin,
        "envpool.python.protocol": protocol,
    }
    for family in FAMILIES:
        modules.update(_family_modules(family, registration))
    sys.modules.update(modules)
    # `import envpool.atari.registration` binds parents' attributes only when it loads a
    # module itself; these are loaded already, so the attributes are set here.
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    if not quiet:
        print("seedpool.install_as_envpool(): `import envpool` now gives seedpool's EnvPool API "
              "(make, make_gym, make_gymnasium, make_dm, make_spec, list_all_envs, register; "
              "envpool.python.envpool.EnvPoolMixin); its pools are seedpool pools of any "
              "seedpool or gymnasium id", file=sys.stderr)
    return shim


def _family_modules(family: str, registration: types.ModuleType) -> dict[str, types.ModuleType]:
    """`envpool.<family>` and `envpool.<family>.registration` (and parents not made yet)."""
    name = f"envpool.{family}"
    package = types.ModuleType(name, f"EnvPool's {family} package under seedpool: its ids are "
                                     "built by seedpool (Atari) or gymnasium.")
    package.__path__ = []  # a package: its submodules are the ones in sys.modules
    reg = types.ModuleType(f"{name}.registration", f"EnvPool's {family} registration: nothing to "
                                                   "register, seedpool knows these ids already.")
    reg.make, reg.make_gym, reg.make_spec = registration.make, registration.make_gym, registration.make_spec
    if family == "atari":
        package.AtariEnvSpec = registration.AtariEnvSpec
    if family == "mujoco.gym":
        reg.gym_mujoco_envs = [(task, tuple(v for v in ("v2", "v3", "v4", "v5") if f"{task}-{v}" in gym.registry),
                                steps) for task, steps in MUJOCO]
    return {name: package, f"{name}.registration": reg}
