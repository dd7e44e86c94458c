"""Test-only helpers shared by every test package (scripted model server, …)."""
