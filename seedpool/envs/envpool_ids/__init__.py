"""EnvPool's ids that no gymnasium registration builds as EnvPool does: its aliases, its own
toy tasks and its MuJoCo v2/v3 ids (table.py), for `seedpool.make` and the EnvPool face alike.
Engine code: it imports neither `make` nor the face."""
