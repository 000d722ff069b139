"""The dm_control suite tasks run natively: cheetah run, walker stand/walk/run, hopper
stand/hop, cartpole balance/swingup (EnvPool's ids CheetahRun-v1, WalkerWalk-v1, ...).

Each class is one task of dm_control 1.0's `suite/<domain>.py`: its model file, control
timestep, observation keys, the draws of its `initialize_episode` and the constants of its
`get_reward` (the expressions are the kernels', kernels.py). tests/test_dmc_native.py plays
each against the dm-control package path.
"""

from __future__ import annotations

import mujoco
import numpy as np

from seedpool.envs.families.dmc_native import kernels as k
from seedpool.envs.families.dmc_native.family import DmcFamily


def gaussian_scale(value_at_margin: float = 0.1) -> float:
    """dm_control's scale of its gaussian sigmoid (`rewards._sigmoids`)."""
    return float(np.sqrt(-2 * np.log(value_at_margin)))


def _set_term(p: np.ndarray, at: int, lower: float, upper: float, margin: float, scale: float) -> None:
    """A tolerance term's (lower, upper, margin, scale) from `p[at]` on (k.T1_LO, ...)."""
    p[at:at + 4] = lower, upper, margin, scale


def randomize_joints(model: mujoco.MjModel, random: np.random.RandomState) -> np.ndarray:
    """dm_control's `randomizers.randomize_limited_and_rotational_joints` of `qpos0`, for the
    hinges and slides these models have: a limited joint uniform in its range, an unlimited
    hinge in [-pi, pi], one draw each, joint by joint."""
    qpos = model.qpos0.copy()
    hinge, slide = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
    for j in range(model.njnt):
        kind, limited = int(model.jnt_type[j]), model.jnt_limited[j]
        range_min, range_max = model.jnt_range[j]
        if kind not in (hinge, slide):
            raise NotImplementedError("the native dm_control tasks randomize hinges and slides only")
        if limited:
            qpos[model.jnt_qposadr[j]] = random.uniform(range_min, range_max)
        elif kind == hinge:
            qpos[model.jnt_qposadr[j]] = random.uniform(-np.pi, np.pi)
    return qpos


class CheetahRun(DmcFamily):
    """cheetah run: reward 1 from a forward speed of 10 on, falling linearly to 0 at 0; the
    reset draws the limited joints uniformly in their ranges and settles 200 physics steps."""

    xml, kind, settle = "cheetah.xml", k.CHEETAH, 200
    run_speed = 10.0

    def observation_layout(self):
        return [("position", (self.model.nq - 1,)), ("velocity", (self.model.nv,))]

    def initial_state(self, random):
        m = self.model
        qpos = m.qpos0.copy()
        limited = m.jnt_limited == 1
        lower, upper = m.jnt_range[limited].T
        qpos[limited] = random.uniform(lower, upper)
        return qpos, np.zeros(m.nv)

    def params(self):
        p = super().params()
        p[k.SPEED] = self.sensor("torso_subtreelinvel")
        _set_term(p, k.T1_LO, self.run_speed, np.inf, self.run_speed, 1 - 0)  # linear, value_at_margin 0
        return p


class WalkerStand(DmcFamily):
    """walker stand: the torso's height and uprightness (walk, run: times a forward speed
    term); the reset draws every joint but the root's slides (randomize_joints)."""

    xml, kind, control_timestep = "walker.xml", k.WALKER, 0.025
    move_speed = 0.0
    stand_height = 1.2

    def observation_layout(self):
        return [("orientations", (2 * (self.model.nbody - 1),)), ("height", ()), ("velocity", (self.model.nv,))]

    def initial_state(self, random):
        return randomize_joints(self.model, random), np.zeros(self.model.nv)

    def params(self):
        p = super().params()
        p[k.TORSO], p[k.SPEED], p[k.MOVE] = self.body("torso"), self.sensor("torso_subtreelinvel"), self.move_speed
        _set_term(p, k.T1_LO, self.stand_height, np.inf, self.stand_height / 2, gaussian_scale())
        _set_term(p, k.T2_LO, self.move_speed, np.inf, self.move_speed / 2, 1 - 0.5)  # linear, value_at_margin 0.5
        return p


class WalkerWalk(WalkerStand):
    move_speed = 1.0


class WalkerRun(WalkerStand):
    move_speed = 8.0


class HopperStand(DmcFamily):
    """hopper stand: the torso's height over the foot in [0.6, 2], times a small-control
    term (hop: times a forward speed term); the reset as walker's."""

    xml, kind, control_timestep = "hopper.xml", k.HOPPER, 0.02
    hopping = False

    def observation_layout(self):
        return [("position", (self.model.nq - 1,)), ("velocity", (self.model.nv,)), ("touch", (2,))]

    def initial_state(self, random):
        return randomize_joints(self.model, random), np.zeros(self.model.nv)

    def params(self):
        p = super().params()
        p[k.TORSO], p[k.FOOT], p[k.MOVE] = self.body("torso"), self.body("foot"), float(self.hopping)
        p[k.SPEED] = self.sensor("torso_subtreelinvel")
        p[k.TOUCH_TOE], p[k.TOUCH_HEEL] = self.sensor("touch_toe"), self.sensor("touch_heel")
        _set_term(p, k.T1_LO, 0.6, 2.0, 0.0, gaussian_scale())  # margin 0: 1 inside, 0 outside
        _set_term(p, k.T2_LO, 2.0, np.inf, 1.0, 1 - 0.5)  # linear, value_at_margin 0.5
        _set_term(p, k.T3_LO, 0.0, 0.0, 1.0, float(np.sqrt(1 - 0)))  # quadratic, value_at_margin 0
        return p


class HopperHop(HopperStand):
    hopping = True


class CartpoleBalance(DmcFamily):
    """cartpole balance (one pole, the smooth reward): upright, centred, small control and
    small angular velocity; the reset draws the cart and pole near the middle and upright
    (swingup: the pole hanging down)."""

    xml, kind = "cartpole.xml", k.CARTPOLE
    swing_up = False

    def observation_layout(self):
        return [("position", (1 + 2 * (self.model.nbody - 2),)), ("velocity", (self.model.nv,))]

    def initial_state(self, random):
        m = self.model
        qpos, nv = m.qpos0.copy(), m.nv
        slider, hinge = (int(m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)])
                         for name in ("slider", "hinge_1"))
        if self.swing_up:
            qpos[slider] = .01 * random.randn()
            qpos[hinge] = np.pi + .01 * random.randn()
            qpos[2:] = .1 * random.randn(nv - 2)
        else:
            qpos[slider] = random.uniform(-.1, .1)
            qpos[1:] = random.uniform(-.034, .034, nv - 1)
        return qpos, 0.01 * random.randn(nv)

    def params(self):
        m, p = self.model, super().params()
        p[k.SLIDER] = m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "slider")]
        _set_term(p, k.T1_LO, 0.0, 0.0, 2.0, gaussian_scale())  # centered
        _set_term(p, k.T2_LO, 0.0, 0.0, 5.0, gaussian_scale())  # small velocity
        _set_term(p, k.T3_LO, 0.0, 0.0, 1.0, float(np.sqrt(1 - 0)))  # small control: quadratic
        return p


class CartpoleSwingup(CartpoleBalance):
    swing_up = True


TASKS = {"CheetahRun-v1": CheetahRun, "WalkerStand-v1": WalkerStand, "WalkerWalk-v1": WalkerWalk,
         "WalkerRun-v1": WalkerRun, "HopperStand-v1": HopperStand, "HopperHop-v1": HopperHop,
         "CartpoleBalance-v1": CartpoleBalance, "CartpoleSwingup-v1": CartpoleSwingup}
