"""JAX's network services: a trust boundary of their own, which cache permissions do not cover."""
