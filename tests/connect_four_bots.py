"""Fixed connect-four players for tests and benchmarks, on PettingZoo's connect_four_v3
observation: a (6, 7, 2) board from the mover's side (plane 0 its own pieces, plane 1 the
opponent's; row 5 is the bottom) and a mask of the 7 columns.

`one_ply` wins when it can, blocks when it must, and otherwise plays a random legal column:
a `--selfplay.bots` / `seedpool eval --against` spec as ``connect_four_bots:one_ply``.
"""
from __future__ import annotations

import numpy as np

ROWS, COLS = 6, 7
_rng = np.random.default_rng(12345)


def reseed(seed: int) -> None:
    """Restart the bots' shared generator: a test that trains or plays against them calls it
    first, so that its games do not depend on which tests ran before it in the same process."""
    global _rng
    _rng = np.random.default_rng(seed)


def drop_row(board: np.ndarray, col: int) -> int:
    """The row a piece dropped into ``col`` lands in (-1 if the column is full); ``board`` (6, 7)
    holds 0 (empty), 1 and 2."""
    empty = np.flatnonzero(board[:, col] == 0)
    return int(empty[-1]) if len(empty) else -1


def wins_at(board: np.ndarray, row: int, col: int, player: int) -> bool:
    """Whether ``player``'s piece at (row, col) makes four in a row on ``board``."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and board[r, c] == player:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def board_of(obs: np.ndarray) -> np.ndarray:
    """The (6, 7) board with the mover's pieces as 1 and the opponent's as 2."""
    obs = np.asarray(obs).reshape(ROWS, COLS, 2)
    return (obs[..., 0] > 0.5).astype(np.int8) + 2 * (obs[..., 1] > 0.5).astype(np.int8)


def winning_moves(board: np.ndarray, player: int, legal: np.ndarray) -> list[int]:
    """The legal columns where ``player`` wins at once."""
    out = []
    for col in np.flatnonzero(legal):
        row = drop_row(board, col)
        if row >= 0 and wins_at(board, row, col, player):
            out.append(int(col))
    return out


def one_ply(obs: np.ndarray, mask: np.ndarray) -> int:
    """Win if possible, else block the opponent's immediate win, else a random legal column."""
    board, legal = board_of(obs), np.asarray(mask).astype(bool)
    for player in (1, 2):
        moves = winning_moves(board, player, legal)
        if moves:
            return moves[0]
    return int(_rng.choice(np.flatnonzero(legal)))


def uniform(obs: np.ndarray, mask: np.ndarray) -> int:
    """A uniformly random legal column."""
    return int(_rng.choice(np.flatnonzero(np.asarray(mask).astype(bool))))


def greedy(obs: np.ndarray, mask: np.ndarray) -> int:
    """Win if possible, else a random legal column (it never blocks)."""
    board, legal = board_of(obs), np.asarray(mask).astype(bool)
    moves = winning_moves(board, 1, legal)
    return moves[0] if moves else int(_rng.choice(np.flatnonzero(legal)))


def gives_away(board: np.ndarray, col: int) -> bool:
    """Whether dropping the mover's piece into ``col`` lets the opponent win right above it."""
    row = drop_row(board, col)
    return row > 0 and wins_at(board, row - 1, col, 2)


def _forced_or_safe(obs: np.ndarray, mask: np.ndarray):
    """The board, the legal columns, one-ply's move (a win, else a block; None if neither) and,
    where there is none, the legal columns that do not give the opponent a win right above."""
    board, legal = board_of(obs), np.asarray(mask).astype(bool)
    for player in (1, 2):
        moves = winning_moves(board, player, legal)
        if moves:
            return board, legal, moves[0], []
    return board, legal, None, [c for c in np.flatnonzero(legal) if not gives_away(board, c)]


def two_ply(obs: np.ndarray, mask: np.ndarray) -> int:
    """`one_ply`, and otherwise a random legal column that does not give the opponent a win
    right above it (any legal column if all do)."""
    board, legal, forced, safe = _forced_or_safe(obs, mask)
    if forced is not None:
        return forced
    return int(_rng.choice(safe if safe else np.flatnonzero(legal)))


def threats(obs: np.ndarray, mask: np.ndarray) -> int:
    """`two_ply`, and among the columns that give nothing away it prefers the ones after which it
    wins at once on its next move in the most columns (a threat, or a fork of two), so that its
    opponent meets threats to block far more often than against random play."""
    board, legal, forced, safe = _forced_or_safe(obs, mask)
    if forced is not None:
        return forced
    if not safe:
        return int(_rng.choice(np.flatnonzero(legal)))
    counts = []
    for c in safe:
        after = board.copy()
        after[drop_row(board, c), c] = 1
        counts.append(len(winning_moves(after, 1, after[0] == 0)))
    best = max(counts)
    return int(_rng.choice([c for c, k in zip(safe, counts) if k == best]))
