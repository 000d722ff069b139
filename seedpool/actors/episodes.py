"""Finished episodes from the engine's per-step info, for logging returns.

The engine reports, on the step where an episode ends, its return and length. Atari with
``episodic_life=True`` ends an *episode* at every life lost and may clip rewards, but users
judge a run by whole-game scores: for such tasks (info has Atari's ``terminated`` and the
unclipped ``reward``) the tracker adds up raw rewards across lives and reports a game when
it is really over (or truncated), as EnvPool-based trainers do.
"""
from __future__ import annotations

import numpy as np

from seedpool.records import Episode


class EpisodeTracker:
    """Feed it every batch of step results; it returns the episodes that finished."""

    def __init__(self, num_envs: int) -> None:
        self.game_return = np.zeros(num_envs, np.float64)
        self.game_length = np.zeros(num_envs, np.int64)

    def update(self, step: int, term: np.ndarray, trunc: np.ndarray, info: dict,
               env_ids: np.ndarray | slice = slice(None)) -> list[Episode]:
        """Episodes ended by this batch (rows ``env_ids`` of the pool); ``step`` stamps them."""
        done, returns, lengths = self.finished(term, trunc, info, env_ids)
        slots = np.arange(len(self.game_return))[env_ids][done]
        return [Episode(step, float(r), int(n), int(k)) for r, n, k in zip(returns[done], lengths[done], slots)]

    def finished(self, term: np.ndarray, trunc: np.ndarray, info: dict,
                 env_ids: np.ndarray | slice = slice(None)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row of this batch: did an episode end there, and its return and length
        (valid where it did)."""
        if "terminated" not in info or "reward" not in info:
            return term | trunc, info["episode_return"], info["episode_length"]
        # A reset row (after a lost life too) is not a game step: its episode_length is 0. Not
        # elapsed_step, which counts the game's steps across lives, as EnvPool's does (an info
        # from EnvPool itself has no episode_length: there elapsed_step is what there is).
        real = info.get("episode_length", info["elapsed_step"]) > 0
        self.game_return[env_ids] += np.where(real, info["reward"], 0.0)
        self.game_length[env_ids] += real
        over = trunc | (term & (info["terminated"] != 0))
        returns, lengths = self.game_return[env_ids].copy(), self.game_length[env_ids].copy()
        if over.any():
            ids = np.arange(len(self.game_return))[env_ids][over]
            self.game_return[ids] = 0.0
            self.game_length[ids] = 0
        return over, returns, lengths

    def state_dict(self) -> dict:
        """Partial game returns and lengths (for checkpoints)."""
        return {"game_return": self.game_return.tolist(), "game_length": self.game_length.tolist()}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting partial games."""
        self.game_return[:] = state["game_return"]
        self.game_length[:] = state["game_length"]
