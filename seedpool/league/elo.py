"""Elo ratings from game results, and the intervals a match's score is reported with.

Pure functions: a rating update is the classic Elo one (Elo 1978), applied game by game in
the order the games ended, so a batch of results gives the same ratings however it is split.
"""
from __future__ import annotations

import math

INITIAL_RATING = 1000.0
"""Every member and the learner start here; a snapshot starts at the learner's rating."""
K_FACTOR = 16.0
"""Rating points a single game can move (the usual value for established players)."""


def expected_score(rating: float, opponent: float) -> float:
    """The score (1 win, 0.5 draw, 0 loss) a player of ``rating`` expects against ``opponent``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def update(rating: float, opponent: float, score: float, k: float = K_FACTOR) -> tuple[float, float]:
    """Both players' ratings after one game in which the first scored ``score``."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"a game's score is 1 (win), 0.5 (draw) or 0 (loss), got {score}")
    delta = k * (score - expected_score(rating, opponent))
    return rating + delta, opponent - delta


def performance_rating(opponents: list[float], scores: list[float]) -> float:
    """The rating at which the games' expected total score equals the total scored (found by
    bisection: the expected total grows with the rating); +-inf for all wins or all losses."""
    if len(opponents) != len(scores) or not scores:
        raise ValueError("performance_rating needs one score per opponent rating, at least one")
    total = sum(scores)
    if total >= len(scores):
        return math.inf
    if total <= 0:
        return -math.inf
    lo, hi = min(opponents) - 2000.0, max(opponents) + 2000.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(expected_score(mid, r) for r in opponents) < total:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate (95% for z = 1.96); draws may count as halves."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
