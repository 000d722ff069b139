"""Evaluate a run's saved policy: returns over N episodes, and an optional video of one.

Works for any algorithm whose checkpoint holds ``model`` and whose config.json holds
``env``, ``env_options`` and ``model``. The algorithm's entry in `seedpool.algorithms` names
its `seedpool.models.greedy.EvalPolicy`: the model config class to read ``model`` as, and how
to rebuild the network so that it acts (Q networks greedily, actor-critics by their head,
SAC's and TD3's actors in the action bounds, recurrent ones with their state carried).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from seedpool.actors.actions import env_actions
from seedpool.actors.agent_rows import is_agent_pool, make_envs, team_rows_and_policy
from seedpool.algorithms import eval_policy_path, load
from seedpool.actors.memory import PolicyMemory
from seedpool.actors.observations import policy_view
from seedpool.algos.dqn import POLICY_AVERAGE
from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.experiment.config import config_from_dict
from seedpool.experiment.run import CHECKPOINT_FILE, RunDirError, read_run_config
from seedpool.models import ActorCritic, is_recurrent
from seedpool.models.greedy import EvalPolicy

# Training-only task options that would distort an evaluation of the real task.
_TRAINING_ONLY = {"episodic_life": False, "reward_clip": False}


@dataclass
class EvalResult:
    """Episode returns of an evaluation and where its video went."""

    returns: list[float]
    lengths: list[int]
    video: Path | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


def load_run_policy(run_dir: Path, spaces, device: str = "cpu", policy: torch.nn.Module | None = None) -> torch.nn.Module:
    """The policy saved in a run folder, rebuilt for ``spaces`` = (obs_space, action_space) as its
    algorithm's `EvalPolicy` says (or ``policy``, built by the caller), in eval mode."""
    algo, cfg = read_run_config(run_dir)
    state = load_checkpoint(Path(run_dir) / CHECKPOINT_FILE, algo, map_location=device)
    if "model" not in state or "model" not in cfg:
        raise RunDirError(f"{run_dir}: the '{algo}' checkpoint has no policy network to evaluate")
    if policy is None:
        kind: EvalPolicy = load(eval_policy_path(algo))
        policy = kind.build(*spaces, config_from_dict(kind.config, cfg["model"]))
    policy = policy.to(device)
    try:
        # A Q-learner that keeps an average of its weights as its policy saves it with its own state.
        average = (state.get("learner") or {}).get(POLICY_AVERAGE)
        policy.load_state_dict(state["model"] if average is None else average)
    except RuntimeError as err:
        raise RunDirError(f"{run_dir}: the checkpoint does not fit the configured network ({err})") from None
    return policy.eval()


def eval_env_options(cfg: dict) -> dict:
    """The run's task options with training-only ones (life loss ends, reward clipping) off."""
    opts = dict(cfg.get("env_options") or {})
    for key, value in _TRAINING_ONLY.items():
        if key in opts:
            opts[key] = value
    return opts


def evaluate_run(run_dir: Path, episodes: int = 10, seed: int = 10_000, deterministic: bool = False,
                 device: str = "cpu", num_envs: int = 8, backend: str = "auto") -> EvalResult:
    """Mean/std return of the saved policy over ``episodes`` full episodes."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    _, cfg = read_run_config(run_dir)
    num_envs = max(1, min(num_envs, episodes))
    with make_envs(cfg["env"], num_envs=num_envs, seed=seed, backend=backend, **eval_env_options(cfg)) as envs:
        pool, policy = _rows_and_policy(run_dir, envs, cfg, device)  # a multi-agent env: one row per agent
        rows = pool.num_envs
        # Each env (each agent row) contributes a fixed quota of episodes, so short episodes are not over-sampled.
        quota = np.full(rows, max(1, episodes // rows))
        quota[: max(0, episodes - rows * quota[0])] += 1
        act = _Actor(policy, rows, pool.single_action_space, device)
        returns, lengths = [], []
        obs, info = pool.reset()
        valid = info.get("active", np.ones(rows, bool))  # False on a final observation (the next step resets)
        while quota.sum() > 0:
            action = act(torch.as_tensor(obs, device=device), deterministic)
            obs, rew, term, trunc, info = pool.step(env_actions(action.cpu().numpy(), pool.single_action_space))
            act.observe(rew, valid)
            valid = info.get("active", ~(term | trunc))
            for i in np.flatnonzero((term | trunc) & (quota > 0)):
                quota[i] -= 1
                returns.append(float(info["episode_return"][i]))
                lengths.append(int(info["episode_length"][i]))
    return EvalResult(returns, lengths)


def _rows_and_policy(run_dir: Path, pool, cfg: dict, device: str):
    """What evaluation steps and acts with: the pool and the saved policy, or a multi-agent
    pool's agent rows (as the run trained on them) and its saved team policy."""
    from seedpool.models import ModelConfig
    from seedpool.models.team import MultiAgentConfig

    if not is_agent_pool(pool):
        pool = policy_view(pool)  # a Dict observation read as training read it
        return pool, load_run_policy(run_dir, (pool.single_observation_space, pool.single_action_space), device)
    ma = config_from_dict(MultiAgentConfig, cfg.get("ma") or {})
    rows, built = team_rows_and_policy(pool, config_from_dict(ModelConfig, cfg["model"]), ma)
    return rows, load_run_policy(run_dir, None, device, policy=built)


def record_video(run_dir: Path, out: Path, seed: int = 10_000, deterministic: bool = False,
                 fps: int = 30, max_steps: int = 5_000) -> Path:
    """Render one episode of the saved policy to ``out`` (.mp4 with imageio-ffmpeg, else .gif)."""
    from seedpool.envs.spec import resolve

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame renders off-screen
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    _, cfg = read_run_config(run_dir)
    try:
        spec = resolve(cfg["env"], render_mode="rgb_array", **eval_env_options(cfg))
        env = spec.env_fn()
        obs, _ = env.reset(seed=seed)
        frames = [env.render()]
    except Exception as err:  # noqa: BLE001 - rendering needs extras (pygame, ...) training did not
        raise RunDirError(f"cannot render {cfg['env']} for a video: {err}. For classic-control envs "
                          "install pygame (pip install pygame)") from None
    policy = load_run_policy(run_dir, (env.observation_space, env.action_space))
    act = _Actor(policy, 1, env.action_space, "cpu")
    limit = min(spec.max_episode_steps or max_steps, max_steps)
    for _ in range(limit):
        action = act(torch.as_tensor(obs).unsqueeze(0), deterministic)
        a = action[0].numpy()
        a = int(a) if a.ndim == 0 else env_actions(a, env.action_space)
        obs, rew, term, trunc, _ = env.step(a)
        act.observe(np.array([rew], np.float32), np.ones(1, bool))
        frames.append(env.render())
        if term or trunc:
            break
    env.close()
    return _write_video(out, frames, fps)


def _write_video(out: Path, frames: list[np.ndarray], fps: int) -> Path:
    """mp4 through imageio-ffmpeg when it is installed, otherwise an animated gif."""
    import imageio.v2 as imageio

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401

            imageio.mimsave(out, frames, fps=fps, macro_block_size=1)
            return out
        except ImportError:
            out = out.with_suffix(".gif")
    imageio.mimsave(out, frames, duration=1000 / fps, loop=0)
    return out


class _Actor:
    """``act(obs, deterministic) -> actions`` for n envs: a feed-forward policy's `act`, or a
    recurrent one's step with each env's memory carried between calls (reset after a final observation)."""

    def __init__(self, policy: ActorCritic, n: int, action_space, device: str) -> None:
        self.policy = policy
        self.memory = None
        if is_recurrent(policy):
            discrete = not action_space.shape
            self.memory = PolicyMemory(policy, n, tuple(action_space.shape),
                                       torch.int64 if discrete else torch.float32, device)

    def __call__(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        with torch.no_grad():
            if self.memory is None:
                return self.policy.act(obs, deterministic)[0]
            return self.memory.act(obs, deterministic=deterministic)[0]

    def observe(self, rewards: np.ndarray, acted_valid: np.ndarray) -> None:
        """After a step: what the memory needs (the reward, and which envs start an episode next)."""
        if self.memory is not None:
            self.memory.observe(np.asarray(rewards, np.float32), acted_valid)
