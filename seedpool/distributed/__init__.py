"""Acting on a Ray cluster: actor groups (one engine pool each) as inference sources.

Only the options and errors live here; Ray itself is imported when a run asks for it
(`--ray-address`), by `seedpool.distributed.launch.make_ray_sources`.
"""
from seedpool.distributed.config import INSTALL_HINT, ClusterError, RayConfig, RayNotInstalledError, require_ray

__all__ = ["INSTALL_HINT", "ClusterError", "RayConfig", "RayNotInstalledError", "require_ray"]
