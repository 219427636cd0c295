"""The run record (`jaxcache.run/1`): what the probes saw, one document per `jaxcache run`, and
what each rank saw of the audited cache.
"""
