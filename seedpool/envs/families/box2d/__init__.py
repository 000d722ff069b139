"""EnvPool's Box2D ids that gymnasium renamed (CarRacing-v2, LunarLander-v2, ...) on gymnasium's envs."""
