"""Atari (ALE) games with EnvPool's preprocessing, as single gymnasium envs."""

from .env import AtariEnv
from .options import AtariOptions, option_names
from .registration import atari_ids, make_atari

__all__ = ["AtariEnv", "AtariOptions", "atari_ids", "make_atari", "option_names"]
