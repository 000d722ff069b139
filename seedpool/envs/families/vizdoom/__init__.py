"""EnvPool's ViZDoom ids (Basic-v1, DefendTheCenter-v1, ...) on the vizdoom package's scenarios."""
