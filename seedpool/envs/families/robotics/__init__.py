"""EnvPool's Gymnasium-Robotics ids (Fetch, Shadow hand, Adroit, point mazes, Franka kitchen) on gymnasium-robotics."""
