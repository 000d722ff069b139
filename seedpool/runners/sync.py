"""The synchronous sampler loop: collect a rollout, update the learner, log, checkpoint."""
from __future__ import annotations

from typing import Callable

from seedpool.algos.learner import Learner
from seedpool.experiment import Run


def run_sync(run: Run, sampler, learner: Learner, total_steps: int, state: Callable[[], dict],
             stop_at_return: float | None = None) -> None:
    """Alternate ``sampler.collect()`` and ``learner.update(rollout)`` until ``total_steps``
    env steps, a stop request, or (``stop_at_return``) a mean return of the last 20 episodes at
    least that high; ``state()`` is what each checkpoint saves (one also at the end)."""
    while not run.done(total_steps):
        rollout, episodes = sampler.collect()
        run.record_episodes(episodes)
        with run.timer.phase("learn"):
            metrics = learner.update(rollout)
        run.end_update(sampler.env_steps, metrics)
        if stop_at_return is not None and len(run.recent_returns) == run.recent_returns.maxlen \
                and run.recent_return >= stop_at_return:
            break
        if run.checkpoint_due():
            run.save_checkpoint(state())
    run.save_checkpoint(state())
