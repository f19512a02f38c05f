"""Context packs: the pure builder that selects, budgets and renders untrusted history."""
