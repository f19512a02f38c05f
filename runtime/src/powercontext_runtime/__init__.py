"""PowerContext runtime: durable, cited, explicitly untrusted project memory for coding agents.

The package is layered (see docs/architecture.md): ``http``, ``cli`` and ``client`` sit on
top of ``services``, which sit on top of ``store``; ``search.analyzer`` and the context
builder are pure and shared. ``composition`` is the single place that wires them together.
"""

__version__ = "0.1.0"
