"""`jaxcache.enable()` / `disable()`: audit, then switch JAX's cache on (plain or sealed),
catching the lifecycle traps, all-or-nothing, with the environment children inherit.
"""
