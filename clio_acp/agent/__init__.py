"""The agent: action loop, tool registry and execution, permissions, loop guard,
cancellation. Never calls a memory model directly."""
