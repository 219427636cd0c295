"""The stores JAX calls: the sealed cache backend over directory tiers and the bucket backend,
what both report, and the entries they fetch ahead (over seal/objects/)."""
