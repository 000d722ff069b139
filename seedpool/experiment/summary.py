"""The closing paragraph of a run: final return, speed, and where the time went or what limited it."""
from __future__ import annotations

from collections.abc import Mapping

from seedpool.experiment.run import RunResult

_PHASES = {"env": "env stepping", "inference": "policy inference", "learn": "learning",
           "wait": "waiting", "other": "other (logging, checkpoints, setup)"}

THREAD_SHARES = (
    "time/share_env", "time/share_inference_wait", "time/share_inference_compute",
    "time/share_inference_idle", "time/share_inference_blocked", "time/share_learner_wait",
    "time/share_learn",
)
"""The per-thread shares of wall time a threaded trainer logs (actors, inference, learner)."""

SATURATED = 0.5
"""Below this busy share no thread is named as the limit."""


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def bottleneck(shares: Mapping[str, float]) -> str:
    """The sentence naming what limited a threaded run, from its mean ``time/share_*`` metrics.

    Actors, inference and learner run at once, so their shares overlap and do not add up
    to 100%; the stage busiest with its own work is the one the others wait for.
    """
    env, learn = shares["time/share_env"], shares["time/share_learn"]
    compute = shares["time/share_inference_compute"]
    busiest = max(("learning", learn), ("inference", compute), ("envs", env), key=lambda kv: kv[1])
    if busiest[1] < SATURATED:
        return (f"No thread was busy half the time (learner {_pct(learn)}, inference {_pct(compute)}, "
                f"env stepping {_pct(env)}): no single part limited this run; "
                "the threads may be contending for CPU cores")
    if busiest[0] == "learning":
        return (f"The learner was busy {_pct(learn)} of the time (inference blocked on the full "
                f"unroll queue {_pct(shares['time/share_inference_blocked'])}): "
                "learning limited this run")
    if busiest[0] == "inference":
        return (f"Inference was computing {_pct(compute)} of the time (actors waited for actions "
                f"{_pct(shares['time/share_inference_wait'])}, the learner for unrolls "
                f"{_pct(shares['time/share_learner_wait'])}): inference limited this run")
    return (f"Actors were stepping envs {_pct(env)} of the time (inference idle "
            f"{_pct(shares['time/share_inference_idle'])}, the learner waiting for unrolls "
            f"{_pct(shares['time/share_learner_wait'])}): envs limited this run")


def summary_text(result: RunResult, env: str, algo: str) -> str:
    """One paragraph a user reads at the end of ``seedpool train``."""
    ret = "no episode finished" if result.final_return != result.final_return else (
        f"final return {result.final_return:.1f} (mean of the last 20 episodes)")
    state = "stopped early (Ctrl-C) at" if result.interrupted else "trained for"
    head = (f"{algo.upper()} on {env} {state} {result.step:,} env steps in {result.time_s:.1f} s "
            f"at {result.sps:,.0f} steps/s; {ret}.")
    if all(k in result.thread_shares for k in THREAD_SHARES):
        # Threads overlap: the phase breakdown below would be one actor's view of the run.
        return f"{head} {bottleneck(result.thread_shares)}."
    # Sequential phases (synchronous PPO): each second went to exactly one phase.
    shares = sorted(result.time_shares.items(), key=lambda kv: -kv[1])
    where = ", ".join(f"{_PHASES.get(k, k)} {_pct(v)}" for k, v in shares)
    return f"{head} Time went to {where}."
