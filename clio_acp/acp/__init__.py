"""The ACP face (Agent Client Protocol v1 over stdio). Protocol translation only."""
