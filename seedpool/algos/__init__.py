"""Learning algorithms: return estimators (pure functions) and loss/update rules."""
