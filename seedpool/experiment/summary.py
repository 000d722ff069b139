"""The closing paragraph of a run: final return, speed and where the time went."""
from __future__ import annotations

from seedpool.experiment.run import RunResult

_PHASES = {"env": "env stepping", "inference": "policy inference", "learn": "learning",
           "wait": "waiting", "other": "other (logging, checkpoints, setup)"}


def summary_text(result: RunResult, env: str, algo: str) -> str:
    """One paragraph a user reads at the end of ``seedpool train``."""
    shares = sorted(result.time_shares.items(), key=lambda kv: -kv[1])
    where = ", ".join(f"{_PHASES.get(k, k)} {100 * v:.0f}%" for k, v in shares)
    ret = "no episode finished" if result.final_return != result.final_return else (
        f"final return {result.final_return:.1f} (mean of the last 20 episodes)")
    state = "stopped early (Ctrl-C) at" if result.interrupted else "trained for"
    return (f"{algo.upper()} on {env} {state} {result.step:,} env steps in {result.time_s:.1f} s "
            f"at {result.sps:,.0f} steps/s; {ret}. Time went to {where}.")
