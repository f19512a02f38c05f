"""Search: the shared text analyzer and application-side ranking (pure, no I/O)."""
