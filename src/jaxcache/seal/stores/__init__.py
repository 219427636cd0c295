"""The stores JAX calls: the sealed cache backend over directory tiers, the bucket backend, and
the object stores (GCS, S3) under one deadline and retry policy."""
