"""The HTTP front end: FastAPI routes, authentication, error envelope and request hygiene."""

from .app import create_app

__all__ = ["create_app"]
