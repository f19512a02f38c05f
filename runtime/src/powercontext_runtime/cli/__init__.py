"""The ``powercontext`` command: operator verbs over the client (or the database directly)."""
