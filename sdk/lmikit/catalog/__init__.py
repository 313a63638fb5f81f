"""Catalogs of model KV geometry and SageMaker GPU instances (standard library only)."""
