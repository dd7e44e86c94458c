"""Model routes: the OpenAI-compatible client, runtime dialects, targets, capacity
accounting, routing and fallback. Knows nothing about memory or sessions."""
