"""EnvPool's Atari options (names, defaults and meaning of envpool 1.2.x), validated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedpool.errors import ConfigError, ConfigTypeError


@dataclass(frozen=True)
class AtariOptions:
    """Preprocessing options of one Atari env; same names and defaults as `envpool.make("<Game>-v5")`."""

    stack_num: int = 4
    """Number of consecutive (preprocessed) frames stacked into one observation."""
    frame_skip: int = 4
    """Emulator frames per agent step; the action repeats and the rewards add up."""
    noop_max: int = 30
    """Reset runs U{0..noop_max-1}+1 no-op frames (one fewer when a FIRE reset follows); must be >= 1."""
    episodic_life: bool = False
    """A lost life ends the episode for the learner; the game itself resets only on game over."""
    zero_discount_on_life_loss: bool = False
    """info["discount"] is 0 on a step that loses a life (as EnvPool's dm_env discount)."""
    reward_clip: bool = False
    """The returned reward is sign(reward); info["reward"] keeps the raw one."""
    use_fire_reset: bool = True
    """Press FIRE once after the reset no-ops, in games whose action set has FIRE."""
    img_height: int = 84
    """Observation height after resizing the 210x160 screen."""
    img_width: int = 84
    """Observation width after resizing the 210x160 screen."""
    gray_scale: bool = True
    """Grayscale observation (stack_num, H, W); else RGB as (3 * stack_num, H, W), channels first."""
    repeat_action_probability: float = 0.0
    """ALE's sticky-action probability (0 = deterministic emulator)."""
    full_action_space: bool = False
    """Use all 18 ALE actions instead of the game's minimal action set."""
    use_inter_area_resize: bool = True
    """Resize with cv2.INTER_AREA; False uses cv2.INTER_LINEAR."""
    max_episode_steps: int = 27000
    """Agent steps per game (counted across lives) before the episode is truncated."""
    mode: int = -1
    """ALE game mode; -1 keeps the ROM's default (envpool 1.2.x option)."""
    difficulty: int = -1
    """ALE game difficulty; -1 keeps the ROM's default (envpool 1.2.x option)."""

    def __post_init__(self) -> None:
        """Reject values of the wrong type or out of range."""
        for f in dataclasses.fields(self):
            _check_type(f.name, getattr(self, f.name), f.type)
        for name, low in (("stack_num", 1), ("frame_skip", 1), ("noop_max", 1),
                          ("img_height", 1), ("img_width", 1), ("max_episode_steps", 1),
                          ("mode", -1), ("difficulty", -1)):
            if getattr(self, name) < low:
                raise ConfigError(f"Atari option {name} must be >= {low}, got {getattr(self, name)}")
        if not 0.0 <= self.repeat_action_probability <= 1.0:
            raise ConfigError("Atari option repeat_action_probability must be in [0, 1], "
                              f"got {self.repeat_action_probability}")

    @classmethod
    def from_kwargs(cls, options: dict[str, Any]) -> AtariOptions:
        """Build from keyword options, raising ValueError that lists the valid names on a typo."""
        valid = option_names()
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"unknown Atari option(s) {unknown}; valid options are {valid}")
        return cls(**options)


def option_names() -> list[str]:
    """Names of all Atari options, in declaration order."""
    return [f.name for f in dataclasses.fields(AtariOptions)]


def _check_type(name: str, value: Any, annotation: str) -> None:
    """Check an option against its annotation; numpy scalars are accepted, bool is not an int."""
    if annotation == "bool":
        ok = isinstance(value, (bool, np.bool_))
    elif annotation == "int":
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    else:  # float
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok:
        raise ConfigTypeError(f"Atari option {name} must be {annotation}, got {value!r} "
                              f"({type(value).__name__})")
