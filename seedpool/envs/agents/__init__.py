"""Many agents as the engine's rows: PettingZoo envs (parallel and turn-based) and native
multi-agent families behind one pool API (see docs/multiagent.md)."""

from seedpool.envs.agents.book import IllegalActionError
from seedpool.envs.agents.layout import AgentLayout, HeterogeneousAgentsError
from seedpool.envs.agents.pool import AgentPool

__all__ = ["AgentLayout", "AgentPool", "HeterogeneousAgentsError", "IllegalActionError"]
