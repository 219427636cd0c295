"""Garbage collection of a cache directory: what goes, in what order, and only what may go.

JAX's cache grows without bound unless `jax_compilation_cache_max_size` is set, and JAX's own
LRU evicts only what one process wrote, only under that limit. `jaxcache gc` collects a whole
directory by size and by age: units.py groups each entry with everything that belongs to it
and says when it was last used; plan.py picks what goes (least recently used first); collect.py
judges the directory and each unit, and deletes through the directory's descriptor after
checking that each file is still the one judged.
"""
