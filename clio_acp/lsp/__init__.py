"""The LSP face (pygls). Protocol translation only."""
