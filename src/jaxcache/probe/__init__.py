"""The in-process probe `jaxcache run` injects, and the runner that injects it."""
