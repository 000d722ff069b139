"""EnvPool's dm_control suite ids (CheetahRun-v1, WalkerWalk-v1, ...) on the dm-control package."""
