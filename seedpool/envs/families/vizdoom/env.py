"""EnvPool's ViZDoom ids on the vizdoom package, in EnvPool's observation and action layout.

An id is a scenario of the vizdoom package in CamelCase with "-v1" ("Basic-v1" is
basic.cfg, "DefendTheCenter-v1" defend_the_center.cfg); EnvPool's own maps (D1Basic-v1 ...
D4Battle2-v1) are read from the envpool-assets package (in the `vizdoom` extra). As EnvPool:
the observation is the last `stack_num` screens (RGB, or grey where the scenario's cfg asks
for GRAY8), each resized to `img_height` x `img_width` (OpenCV's area interpolation, or
bilinear with `use_inter_area_resize=False`) and channel-first, stacked on the channel axis,
`[3 * stack_num, H, W]` (or `[stack_num, H, W]`) uint8; the action is one float64 value per button
of the scenario (a binary button is pressed where its value is not 0), or with
`use_combined_action=True` one Discrete index into EnvPool's set of button combinations
(actions.py; `force_speed` and `delta_button_config` shape it as in EnvPool); a step runs
`frame_skip` tics; `max_episode_steps` is 525; `info` holds the scenario's game variables.
The reward is the scenario's own (EnvPool's `reward_config` shaping is not reproduced:
docs/compat.md). `VizdoomCustom-v1` takes EnvPool's `cfg_path` (and `wad_path`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.families.packaged import EnvPoolTask, check_options, positive_int, require
from seedpool.envs.families.vizdoom.actions import combined_actions
from seedpool.errors import ConfigError, UnknownEnvError

# The vizdoom package's scenario files EnvPool registers (envpool/vizdoom/registration.py).
SCENARIOS = ("basic", "basic_audio", "basic_notifications", "cig", "deadly_corridor", "deathmatch",
             "defend_the_center", "defend_the_line", "health_gathering", "health_gathering_supreme",
             "multi_duel", "my_way_home", "predict_position", "rocket_basic", "simpler_basic", "take_cover")
# Multi-player scenarios: the engine waits for the other players (or bots) a host sets up.
MULTIPLAYER = ("cig", "multi_duel")
CUSTOM = "VizdoomCustom-v1"
_IDS = {"".join(w.capitalize() for w in name.split("_")) + "-v1": name for name in SCENARIOS}
# EnvPool's own maps: they ship in the envpool-assets package (EnvPool's data, Apache-2.0), not
# with vizdoom; its cfgs ask for GRAY8 screens.
ASSET_MAPS = {"D1Basic-v1": "D1_basic", "D2Navigation-v1": "D2_navigation", "D3Battle-v1": "D3_battle",
              "D4Battle2-v1": "D4_battle2"}
OPTIONS = {"img_height": 84, "img_width": 84, "stack_num": 4, "frame_skip": 4, "use_inter_area_resize": True,
           "episodic_life": False, "use_combined_action": False, "force_speed": False,
           "delta_button_config": {}, "max_episode_steps": 525, "cfg_path": "", "wad_path": ""}


def vizdoom_ids() -> list[str]:
    """EnvPool's ViZDoom ids whose scenario the vizdoom package ships, its own maps, and VizdoomCustom-v1."""
    return sorted([*_IDS, *ASSET_MAPS, CUSTOM])


class DoomEnv(gym.Env):
    """One Doom game of a scenario file; observations of one screen, `[3, H, W]` uint8."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, cfg: str, wad: str, size: tuple[int, int], frame_skip: int, area: bool, episodic_life: bool,
                 combined: dict[str, Any] | None = None):
        """`combined`: EnvPool's `force_speed` and `delta_button_config` where the action is
        an index into the button combinations (`use_combined_action=True`), else None."""
        import vizdoom as vzd

        self._game = game = vzd.DoomGame()
        # The engine writes its settings file into the working directory unless told where.
        self._scratch = tempfile.mkdtemp(prefix="seedpool-vizdoom-")
        weakref.finalize(self, shutil.rmtree, self._scratch, True)  # an env never closed leaves none
        game.set_doom_config_path(os.path.join(self._scratch, "_vizdoom.ini"))
        game.load_config(cfg)
        if wad:
            game.set_doom_scenario_path(wad)
        game.set_window_visible(False)
        game.set_sound_enabled(False)
        # EnvPool keeps a cfg's GRAY8 screens (one channel) and gives RGB for every other format.
        grey = game.get_screen_format() == vzd.ScreenFormat.GRAY8
        if not grey:
            game.set_screen_format(vzd.ScreenFormat.CRCGCB)
        self._variables = [str(v).split(".")[-1] for v in game.get_available_game_variables()]
        self._size, self._skip, self._episodic_life = size, frame_skip, episodic_life
        self._area = area
        self._started = False
        height, width = size
        self.observation_space = gym.spaces.Box(0, 255, (1 if grey else 3, height, width), np.uint8)
        buttons = [int(b) for b in game.get_available_buttons()]
        self._combined = None if combined is None else combined_actions(
            buttons, bool(combined["force_speed"]), combined["delta_button_config"], list(vzd.Button.__members__))
        self.action_space = (gym.spaces.Box(-np.inf, np.inf, (len(buttons),), np.float64) if self._combined is None
                             else gym.spaces.Discrete(len(self._combined)))
        self._last = np.zeros(self.observation_space.shape, np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._game.set_seed(int(seed))
        if not self._started:
            self._game.init()
            self._started = True
        self._game.new_episode()
        return self._screen(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._combined is None:
            buttons = [float(a) for a in np.asarray(action).reshape(-1)]
        else:  # the pool has checked the index against the Discrete space
            buttons = self._combined[int(np.asarray(action).reshape(-1)[0])].tolist()
        reward = self._game.make_action(buttons, self._skip)
        finished = self._game.is_episode_finished() or (self._episodic_life and self._game.is_player_dead())
        obs = self._last if self._game.is_episode_finished() else self._screen()
        return obs, float(reward), bool(finished), False, self._info()

    def _screen(self) -> np.ndarray:
        import cv2

        state = self._game.get_state()
        if state is None:
            return self._last
        height, width = self._size
        how = cv2.INTER_AREA if self._area else cv2.INTER_LINEAR
        screen = state.screen_buffer if state.screen_buffer.ndim == 3 else state.screen_buffer[None]
        frame = np.stack([cv2.resize(channel, (width, height), interpolation=how) for channel in screen])
        self._last = frame.astype(np.uint8)
        return self._last

    def _info(self) -> dict[str, float]:
        state = self._game.get_state()
        if state is None or state.game_variables is None:
            return {}
        return {name: float(v) for name, v in zip(self._variables, state.game_variables)}

    @property
    def last_buttons(self) -> list[float]:
        """The button values the last step set (vizdoom's `get_last_action`), in the
        scenario's button order: what a combined action index pressed."""
        return list(self._game.get_last_action())

    @property
    def game_variables(self) -> list[str]:
        """The scenario's game variables (the keys of `info`)."""
        return list(self._variables)

    def close(self) -> None:
        if self._started:
            self._game.close()
            self._started = False
        shutil.rmtree(self._scratch, ignore_errors=True)


def make_vizdoom(task_id: str, **options: Any) -> EnvPoolTask:
    """Build a ViZDoom id EnvPool lists, with EnvPool's option names."""
    if task_id not in _IDS and task_id not in ASSET_MAPS and task_id != CUSTOM:
        raise UnknownEnvError(f"unknown ViZDoom task id {task_id!r}; this family builds {vizdoom_ids()}")
    require("vizdoom", task_id)
    import vizdoom as vzd

    opts = check_options(task_id, options, OPTIONS)
    if _IDS.get(task_id) in MULTIPLAYER:
        raise ConfigError(f"{task_id} is a multi-player ViZDoom scenario: its game waits for the players a host "
                          "sets up, which this family does not; the single-player scenarios are "
                          f"{[i for i, n in _IDS.items() if n not in MULTIPLAYER]}")
    cfg, wad = opts["cfg_path"], opts["wad_path"]
    if task_id == CUSTOM and not cfg:
        raise ConfigError(f"{CUSTOM} needs cfg_path=... (a ViZDoom scenario .cfg), as in EnvPool")
    if task_id in ASSET_MAPS and not cfg:
        cfg, wad = _asset_map(task_id)
    elif task_id != CUSTOM:
        cfg = cfg or os.path.join(vzd.scenarios_path, f"{_IDS[task_id]}.cfg")
    size = (positive_int("img_height", opts["img_height"]), positive_int("img_width", opts["img_width"]))
    if not isinstance(opts["delta_button_config"], dict):
        raise ConfigError("delta_button_config must be a dict {button name: (num, min, max)}, as in EnvPool; "
                          f"got {opts['delta_button_config']!r}")
    combined = {k: opts[k] for k in ("force_speed", "delta_button_config")} if opts["use_combined_action"] else None
    env = DoomEnv(cfg, wad, size, positive_int("frame_skip", opts["frame_skip"]),
                  bool(opts["use_inter_area_resize"]), bool(opts["episodic_life"]), combined)
    stack = positive_int("stack_num", opts["stack_num"])
    limit = positive_int("max_episode_steps", opts.pop("max_episode_steps"))
    return EnvPoolTask(env, max_episode_steps=limit, frame_stack=stack, stack_channels=True,
                       options={**opts, "cfg_path": cfg, "wad_path": wad},
                       info_keys={k: np.float64 for k in env.game_variables})


def _asset_map(task_id: str) -> tuple[str, str]:
    """The cfg and wad of one of EnvPool's own maps, from the envpool-assets package."""
    import importlib.util

    spec = importlib.util.find_spec("envpool_assets")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{task_id} is one of EnvPool's own ViZDoom maps, which ship in the envpool-assets "
                                  "package, not with vizdoom: pip install 'seedpool[vizdoom]'", name="envpool_assets")
    base = os.path.join(os.path.dirname(spec.origin), "vizdoom", "maps", ASSET_MAPS[task_id])
    return f"{base}.cfg", f"{base}.wad"
