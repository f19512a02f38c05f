"""Application services: what each operation does, independent of HTTP, MCP or the CLI."""
