"""HTTP faces: thin FastAPI routers over the services."""
