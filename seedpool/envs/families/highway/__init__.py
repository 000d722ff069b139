"""EnvPool's highway-env ids (Highway-v0 / highway-v0, Merge-v0, Parking-v0, ...) on the highway-env package."""
