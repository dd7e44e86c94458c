"""Context management: token estimates, compaction (summary + retained tail) and
spill of oversized tool results with read-back. Decides no memory policy."""
