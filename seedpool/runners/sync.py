"""The synchronous sampler loop: collect a rollout, update the learner, log (PPO, DQN, SAC, TD3)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

from seedpool.algos.learner import Learner
from seedpool.experiment import Run


class SyncLoop:
    """One round is ``sampler.collect()`` then ``learner.update(rollout)``; `Training` drives it.

    Everything happens in the caller's thread, so a pause is the end of a round and the learner
    is always between updates when the caller holds control."""

    def __init__(self, sampler, learner: Learner, state: Callable[[], dict],
                 group_of: Callable[[Any], str] | None = None) -> None:
        """`group_of(episode)`: the name its returns are also logged under (a multi-agent run's
        agent groups), or None."""
        self.sampler, self.learner, self._state, self.group_of = sampler, learner, state, group_of

    def step(self, run: Run, until_step: int) -> bool:
        """Collect one rollout, learn from it, close the update in ``run``."""
        rollout, episodes = self.sampler.collect()
        run.record_episodes(episodes, self.group_of)
        with run.timer.phase("learn"):
            metrics = self.learner.update(rollout)
        run.end_update(self.sampler.env_steps, metrics)
        return True

    def pause(self) -> None:
        """Nothing runs between rounds."""

    def between_updates(self) -> ContextManager:
        """Always true between rounds."""
        return contextlib.nullcontext()

    def state(self) -> dict[str, Any]:
        """What a checkpoint saves (the learner's, the sampler's and the generators' state)."""
        return self._state()

    def close(self) -> None:
        """The trainer closes the envs."""
