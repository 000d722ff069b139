"""AtariEnv: one ALE game with EnvPool's preprocessing, as a plain gymnasium.Env.

Semantics follow envpool 1.2.x's C++ AtariEnv (`envpool/atari/atari_env.h`) step for step, so
a seeded AtariEnv gives EnvPool's observations, rewards and flags bit for bit (see
tests/test_atari.py). Where that C++ does something odd we keep it and say so in a comment.

Where a default Pong step goes (profiles in docs/engine.md): mostly the four ALE `act()`
calls, then the INTER_AREA resize (210x160 -> 84x84 is not an integral ratio, so OpenCV
takes its generic scalar path; EnvPool calls the same routine; `resize.py` computes the same
result bit for bit in about half the time, and is used where it applies) and the two `getScreenGrayscale`
calls (ALE's palette loop; a cv2.LUT over `getScreen` indices measured no faster); the
max-pool and the Python around them are small. Returning a fresh stacked array, shifting a
preallocated stack and copying it, or returning the stack itself measured alike, so obs is
a fresh array, safe to keep. OpenCV does not parallelise a resize this small, so its thread
count does not matter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import cv2
import gymnasium
import numpy as np
from ale_py import ALEInterface

from .games import camel_name, game_info, resolve_game
from .noop import NoopSampler
from .options import AtariOptions
from .resize import area_resizer

_NOOP, _FIRE = 0, 1  # ALE action ids
_SEED_MOD = 2**31  # ALE's random_seed is a C int; EnvPool's seed is one too


class AtariEnv(gymnasium.Env):
    """An Atari game from ale-py with EnvPool's preprocessing (noop/fire reset, frame skip with
    max-pool, grayscale, resize, frame stack, episodic life, reward clip, time limit).

    Construct as `AtariEnv("Pong", **options)` with EnvPool's option names (see AtariOptions).
    `reset(seed=s)` reloads the emulator seeded with `s` and restarts the no-op generator, like
    `envpool.make(..., seed=s, num_envs=1)`. `info` holds `lives`, the unclipped `reward`,
    `terminated` (1 on real game over, as EnvPool), `discount` (EnvPool's dm_env discount,
    which is how `zero_discount_on_life_loss` shows) and `elapsed_step` (the game's steps,
    across lives, as EnvPool counts them; a pool reports this one).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}
    # Scalar info keys (and dtypes) the seedpool engine forwards into its shared info arrays.
    info_spec: dict[str, Any] = {
        "lives": np.int32, "reward": np.float32, "terminated": np.int32, "discount": np.float32,
        "elapsed_step": np.int32,
    }

    def __init__(self, game: str, *, render_mode: str | None = None, seed: int | None = None,
                 **options: Any) -> None:
        """Validate the options and build spaces; the emulator loads lazily at the first reset."""
        self.options = opts = AtariOptions.from_kwargs(options)
        self.game = resolve_game(game)
        self._info = info = game_info(self.game)
        _check_choice("mode", opts.mode, info.modes)
        _check_choice("difficulty", opts.difficulty, info.difficulties)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": max(1, 60 // opts.frame_skip)}

        self._actions = list(info.legal_actions if opts.full_action_space else info.minimal_actions)
        self._num_actions = len(self._actions)
        # EnvPool presses FIRE at reset only where FIRE (ALE id 1) is in the game's action set.
        self._fire_reset = opts.use_fire_reset and _FIRE in self._actions
        self._channels = 1 if opts.gray_scale else 3
        obs_shape = (opts.stack_num * self._channels, opts.img_height, opts.img_width)
        self.observation_space = gymnasium.spaces.Box(0, 255, obs_shape, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(self._num_actions)
        self._interp = cv2.INTER_AREA if opts.use_inter_area_resize else cv2.INTER_LINEAR
        # OpenCV's INTER_AREA result, compiled (resize.py); cv2 itself where that does not apply.
        self._area = (area_resizer(info.screen, (opts.img_height, opts.img_width))
                      if opts.gray_scale and opts.use_inter_area_resize else None)

        raw_shape = info.screen if opts.gray_scale else (*info.screen, 3)
        self._pool = [np.zeros(raw_shape, np.uint8), np.zeros(raw_shape, np.uint8)]
        # slots[k]: where the frame k frames before the last goes; _push reads pool[0].
        # envpool 1.2.5 returns the plain frame when frame_skip == 1 (measured), so no pooling.
        self._max_pool = opts.frame_skip >= 2
        self._slots = (self._pool[1], self._pool[0]) if self._max_pool else (self._pool[0],)
        self._resized = np.zeros((opts.img_height, opts.img_width, 3), np.uint8)  # RGB only
        self._stack = np.zeros(obs_shape, np.uint8)

        self._ale: ALEInterface | None = None
        self._grab_screen: Any = None  # the emulator's screen getter, bound in _load
        self._seed = seed if seed is None else _check_seed(seed)
        self._noop: NoopSampler | None = None
        self._elapsed = 0
        self._lives = 0
        self._done = True
        self._new_game = False  # the next reset starts a new game even with lives left

    def on_explicit_reset(self) -> None:
        """The engine calls this before a reset the caller asked for (not an autoreset): as
        in EnvPool, it starts a new game even under episodic_life with lives left."""
        self._new_game = True

    # ---------------------------------------------------------------- gymnasium API

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; with episodic_life and lives left this only continues the game."""
        if options:
            raise ValueError(f"AtariEnv.reset takes no options, got {sorted(options)}")
        if seed is not None:
            self._load(_check_seed(seed))
        elif self._ale is None:
            self._load(self._seed if self._seed is not None else _fresh_seed())
        super().reset(seed=seed)
        ale, opts = self._ale, self.options
        noops = self._noop.draw() + 1 - self._fire_reset
        push_all = False
        if (not opts.episodic_life or self._new_game or ale.game_over()
                or self._elapsed >= opts.max_episode_steps):
            self._new_game = False
            ale.reset_game()
            self._elapsed = 0
            push_all = True
        for _ in range(noops):
            ale.act(_NOOP)
            if ale.game_over():
                ale.reset_game()
                push_all = True
        if self._fire_reset:
            ale.act(_FIRE)
        self._grab_screen(self._pool[0])
        obs = self._push(push_all)
        self._lives = ale.lives()
        self._done = False
        return obs, {"lives": self._lives, "reward": 0.0, "terminated": int(ale.game_over()),
                     "discount": 1.0, "elapsed_step": self._elapsed}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Repeat `action` for frame_skip frames and return the preprocessed result."""
        if self._done:
            raise RuntimeError("AtariEnv.step() called before reset() or after the episode "
                               "ended; call reset() first")
        if not 0 <= action < self._num_actions:
            raise ValueError(f"action must be an int in [0, {self._num_actions}), got {action!r}")
        ale, opts, slots = self._ale, self.options, self._slots
        act, game_over, grab = ale.act, ale.game_over, self._grab_screen
        ale_action = self._actions[action]
        reward = 0
        left = opts.frame_skip
        while True:
            reward += act(ale_action)
            if left <= 2:  # the last two frames go to the max-pool buffers
                grab(slots[left - 1])
            left -= 1
            over = game_over()
            if left == 0 or over:
                break
        # As in EnvPool: max-pool only when every frame ran. If the game ended before the
        # second-to-last frame, pool[0] still holds the previous step's pooled frame and that
        # is what gets pushed (the final obs of a finished game is not used for learning).
        if left == 0 and self._max_pool:
            pool = self._pool
            np.maximum(pool[0], pool[1], out=pool[0])
        obs = self._push(False)

        self._elapsed += 1
        truncated = self._elapsed >= opts.max_episode_steps
        done = over or truncated
        lives = ale.lives()
        if opts.episodic_life and 0 < lives < self._lives:
            done = True
        if opts.zero_discount_on_life_loss:
            discount = float(lives == self._lives and not done)
        else:
            discount = 0.0 if done else 1.0
        self._lives = lives
        self._done = done
        truncated = done and truncated
        raw_reward = float(reward)
        if opts.reward_clip:
            reward = float((reward > 0) - (reward < 0))
        info = {"lives": lives, "reward": raw_reward, "terminated": int(over),
                "discount": discount, "elapsed_step": self._elapsed}
        return obs, float(reward), done and not truncated, truncated, info

    @property
    def task_options(self) -> dict[str, Any]:
        """Every option of this env, defaults included (a pool's `config` lists them)."""
        return dataclasses.asdict(self.options)

    def render(self) -> np.ndarray:
        """The current 210x160x3 RGB screen (for videos)."""
        if self.render_mode != "rgb_array":
            raise RuntimeError("AtariEnv.render() needs render_mode='rgb_array' at construction, "
                               f"got render_mode={self.render_mode!r}")
        if self._ale is None:
            raise RuntimeError("AtariEnv.render() called before the first reset()")
        return self._ale.getScreenRGB()

    def close(self) -> None:
        """Drop the emulator."""
        self._ale = self._grab_screen = None
        self._done = True

    def __repr__(self) -> str:
        return f"AtariEnv({camel_name(self.game)!r})"

    # ---------------------------------------------------------------- internals

    def _load(self, seed: int) -> None:
        """(Re)load the ROM with ALE seeded by `seed` and restart the no-op generator."""
        opts = self.options
        ale = ALEInterface()
        ale.setInt("random_seed", seed)
        ale.setFloat("repeat_action_probability", opts.repeat_action_probability)
        ale.loadROM(self._info.rom_path)
        if opts.mode >= 0:
            ale.setMode(opts.mode)
        if opts.difficulty >= 0:
            ale.setDifficulty(opts.difficulty)
        self._ale = ale
        # Writes the current screen into a preallocated buffer, without allocating.
        self._grab_screen = ale.getScreenGrayscale if opts.gray_scale else ale.getScreenRGB
        self._noop = NoopSampler(seed, opts.noop_max)
        # Forces a real reset_game() at the next reset, even with episodic_life.
        self._elapsed = opts.max_episode_steps

    def _push(self, push_all: bool) -> np.ndarray:
        """Resize pool[0], append it to the frame stack (or fill the stack with it)."""
        c = self._channels
        obs = np.empty_like(self._stack)
        if c == 1:
            newest = obs[-1]  # contiguous (H, W): the resize writes straight into the new obs
            if self._area is not None:
                self._area(self._pool[0], newest)
            else:
                cv2.resize(self._pool[0], newest.shape[::-1], dst=newest, interpolation=self._interp)
        else:
            resized = self._resized
            cv2.resize(self._pool[0], resized.shape[1::-1], dst=resized, interpolation=self._interp)
            newest = obs[-3:]
            np.copyto(newest, resized.transpose(2, 0, 1))
        if push_all:  # a new game: every stack slot gets the first frame
            obs[:-c].reshape(-1, *newest.shape)[:] = newest
        else:
            obs[:-c] = self._stack[c:]
        self._stack = obs
        return obs


def _check_choice(name: str, value: int, available: tuple[int, ...]) -> None:
    if value != -1 and value not in available:
        raise ValueError(f"Atari option {name}={value} is not available for this game; "
                         f"choose -1 (default) or one of {list(available)}")


def _check_seed(seed: Any) -> int:
    """Seeds are non-negative ints; ALE takes a C int, so larger ones wrap modulo 2**31."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed) % _SEED_MOD


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0]) % _SEED_MOD
