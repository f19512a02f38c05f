"""Wire contract: request/response models, limits and schema names.

These models are the single definition of the HTTP API's shapes: FastAPI validates with them
and generates the OpenAPI document from them, and the Python client decodes with them.
"""
