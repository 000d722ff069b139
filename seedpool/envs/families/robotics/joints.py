"""gymnasium-robotics 1.4.2 with mujoco >= 3.x's typed enums: its joint helpers
(`gymnasium_robotics.utils.mujoco_utils.{get,set}_joint_{qpos,qvel}`) assert
`model.jnt_type[i] in (mjJNT_HINGE, mjJNT_SLIDE)`, which is False for a numpy integer
against mujoco's enum members there, so every Fetch and hand env fails in its reset.

`fix_joint_types()` (idempotent, and a no-op where the check passes) wraps those four
helpers so that a hinge or slide joint, one number in qpos / qvel, is read or written
here; every other joint goes to the package's own helper unchanged.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

_FIXED = False


def _needs_fix() -> bool:
    import mujoco

    slide = np.int32(int(mujoco.mjtJoint.mjJNT_SLIDE))
    return slide not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)


def _scalar_joint(original: Callable[..., Any], address: str, field: str, write: bool) -> Callable[..., Any]:
    import mujoco

    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))

    def helper(model: Any, data: Any, name: str, *value: Any) -> Any:
        joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if joint == -1 or int(model.jnt_type[joint]) not in scalar:
            return original(model, data, name, *value)
        start = getattr(model, address)[joint]
        values = getattr(data, field)
        if write:
            values[start:start + 1] = np.array(value[0])
            return None
        return values[start:start + 1].copy()

    return helper


def fix_joint_types() -> None:
    """Wrap gymnasium-robotics' four joint helpers where mujoco's enums defeat their check."""
    global _FIXED
    if _FIXED:
        return
    _FIXED = True
    if not _needs_fix():
        return
    from gymnasium_robotics.utils import mujoco_utils as utils

    utils.set_joint_qpos = _scalar_joint(utils.set_joint_qpos, "jnt_qposadr", "qpos", write=True)
    utils.set_joint_qvel = _scalar_joint(utils.set_joint_qvel, "jnt_dofadr", "qvel", write=True)
    utils.get_joint_qpos = _scalar_joint(utils.get_joint_qpos, "jnt_qposadr", "qpos", write=False)
    utils.get_joint_qvel = _scalar_joint(utils.get_joint_qvel, "jnt_dofadr", "qvel", write=False)
