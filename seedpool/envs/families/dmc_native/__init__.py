"""dm_control suite tasks (EnvPool's ids: CheetahRun-v1, WalkerWalk-v1, ...) run natively on MuJoCo."""
