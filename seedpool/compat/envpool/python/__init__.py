"""`envpool.python` under `seedpool.install_as_envpool()`: EnvPool's protocol and mixin names."""
