"""Atari (ALE) games with EnvPool's preprocessing, as single gymnasium envs.

`env.AtariEnv` is one game; `factory.atari_ids` / `factory.make_atari` build them by id
("Pong-v5"); `options.AtariOptions` holds EnvPool's option names. Importing this package
does not import ale-py: registration.py names its code by path.
"""
