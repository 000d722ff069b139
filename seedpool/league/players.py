"""The players a league holds: a policy network (a snapshot of the learner, a loaded
checkpoint), a uniformly random legal mover, a user's scripted function.

A player acts for some rows of the game's pool at a time and is told, through `begin`, at
which rows it starts a new episode: a player with memory (a recurrent policy's state, a
scripted bot's notes) forgets there what it knew of the last game, so nothing it carries
crosses from one opponent's episode into the next.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch

from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.experiment.config import config_from_dict
from seedpool.experiment.run import CHECKPOINT_FILE, read_run_config
from seedpool.models import ModelConfig
from seedpool.models.recurrent import is_recurrent
from seedpool.models.team import MultiAgentConfig, make_team_policy

_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class Player(Protocol):
    """What a league member acts with."""

    def act(self, features: np.ndarray, obs: np.ndarray, mask: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
        """Actions for pool rows ``rows``: their policy features, raw observations and action masks."""

    def begin(self, rows: np.ndarray) -> None:
        """These rows start a new episode with this player: forget whatever was kept for them."""


class PolicyPlayer:
    """A policy network acting by sampling its distribution (a recurrent one keeps each row's
    state, started afresh by `begin`); ruled-out actions are masked."""

    def __init__(self, policy: torch.nn.Module, num_rows: int, device: str | torch.device = "cpu",
                 deterministic: bool = False) -> None:
        self.policy, self.device, self.deterministic = policy.eval(), device, deterministic
        for p in policy.parameters():
            p.requires_grad_(False)
        self.recurrent = is_recurrent(policy)
        if self.recurrent:
            self.state = policy.initial_state(num_rows, device)
            self.first = torch.ones(num_rows, dtype=torch.bool, device=device)
            self.prev_action = torch.zeros(num_rows, dtype=torch.int64, device=device)

    def act(self, features: np.ndarray, obs: np.ndarray, mask: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(features, device=self.device)
        with torch.inference_mode():
            if not self.recurrent:
                logits, _ = self.policy(x)
            else:
                r = torch.as_tensor(rows, device=self.device)
                state = {k: v[r] for k, v in self.state.items()}
                logits, _, state = self.policy.step(x, state, self.first[r], self.prev_action[r])
                for k, v in state.items():
                    self.state[k][r] = v
                self.first[r] = False
            logits = logits.float()
            if mask is not None:
                legal = torch.as_tensor(mask, device=self.device).bool()
                logits = logits.masked_fill(~legal, torch.finfo(logits.dtype).min)
            if self.deterministic:
                action = logits.argmax(1)
            else:
                action = torch.distributions.Categorical(logits=logits).sample()
            if self.recurrent:
                self.prev_action[torch.as_tensor(rows, device=self.device)] = action
        return action.cpu().numpy()

    def begin(self, rows: np.ndarray) -> None:
        if self.recurrent and len(rows):
            r = torch.as_tensor(rows, device=self.device)
            for v in self.state.values():
                v[r] = 0.0
            self.first[r] = True
            self.prev_action[r] = 0


class RandomPlayer:
    """A uniformly random legal action."""

    def __init__(self, num_actions: int, rng: np.random.Generator) -> None:
        self.num_actions, self.rng = num_actions, rng

    def act(self, features: np.ndarray, obs: np.ndarray, mask: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
        if mask is None:
            return self.rng.integers(self.num_actions, size=len(rows))
        # The largest of uniform draws over the legal actions is a uniform legal action.
        return (self.rng.random(mask.shape) * mask).argmax(1)

    def begin(self, rows: np.ndarray) -> None:
        """No memory."""


class ScriptedPlayer:
    """A user's function of (observation, action_mask) -> action, called row by row."""

    def __init__(self, fn: Callable[[np.ndarray, np.ndarray | None], Any], name: str) -> None:
        self.fn, self.name = fn, name

    def act(self, features: np.ndarray, obs: np.ndarray, mask: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), np.int64)
        for i in range(len(rows)):
            a = self.fn(obs[i], None if mask is None else mask[i])
            try:
                out[i] = int(a)
            except (TypeError, ValueError):
                raise ConfigError(f"bot {self.name} returned {a!r}; it must return an action (an int)") from None
            if mask is not None and not (0 <= out[i] < mask.shape[1] and mask[i, out[i]]):
                raise ConfigError(f"bot {self.name} chose action {out[i]}, which its action mask rules out "
                                  f"(legal: {np.flatnonzero(mask[i]).tolist()})")
        return out

    def begin(self, rows: np.ndarray) -> None:
        """The function keeps no per-row state seedpool knows of."""


def load_function(spec: str) -> Callable[..., Any]:
    """The function a "module:function" spec names, or a clear error."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:  # a module in the working directory, as `python -m` finds it
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"bot {spec!r}: cannot import {module_name!r} ({err})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"bot {spec!r}: {module_name} has no function {attr!r}")
    return fn


def checkpoint_paths(path: Path) -> tuple[Path, Path]:
    """(run folder, checkpoint file) of a run folder or of a checkpoint file in one."""
    path = Path(path)
    return (path, path / CHECKPOINT_FILE) if path.is_dir() else (path.parent, path)


def load_game_policy(path: Path, rows: Any, env_id: str, device: str | torch.device = "cpu") -> torch.nn.Module:
    """The policy saved by a run on the same game (a run folder or its checkpoint.pt), rebuilt
    for ``rows`` (`AgentRows`): its features must be laid out as this run's are."""
    run_dir, ckpt_file = checkpoint_paths(path)
    algo, cfg = read_run_config(run_dir)
    if cfg.get("env") != env_id:
        raise ConfigError(f"{path} is a run on {cfg.get('env')!r}; this league plays {env_id!r}")
    ma = config_from_dict(MultiAgentConfig, cfg.get("ma") or {})
    if ma != rows.ma:
        raise ConfigError(f"{path} was trained with {ma}, whose inputs differ from this run's {rows.ma}: "
                          "pass the same --ma.* options")
    policy = make_team_policy(rows.inputs, len(rows.groups), rows.single_action_space,
                              config_from_dict(ModelConfig, cfg["model"]), ma)
    state = load_checkpoint(ckpt_file, algo, map_location=str(device))
    try:
        policy.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as err:
        raise ConfigError(f"{ckpt_file}: its network does not fit its run's config ({err})") from None
    return policy.to(device)


def make_bot(spec: str, rows: Any, env_id: str, rng: np.random.Generator,
             device: str | torch.device = "cpu") -> Player:
    """The player a --selfplay.bots (or eval --against) spec names: "random", a checkpoint, or
    "module:function"."""
    if spec == "random":
        n = getattr(rows.single_action_space, "n", None)
        if n is None:
            raise ConfigError(f"the random bot picks among discrete actions; this game has {rows.single_action_space}")
        return RandomPlayer(int(n), rng)
    if Path(spec).exists():
        return PolicyPlayer(load_game_policy(Path(spec), rows, env_id, device), rows.num_envs, device)
    if _FUNCTION.match(spec):
        return ScriptedPlayer(load_function(spec), spec)
    raise ConfigError(f"unknown bot {spec!r}: use 'random', a run folder or checkpoint.pt of a run on this game, "
                      "or 'module:function' (a function of (observation, action_mask) -> action)")
