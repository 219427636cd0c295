"""Generations: a warmed cache published whole, as one signed manifest naming every entry by its
digest, with the entries stored by digest beside it and a pointer that moves to it last.

Readers of a generation verify its signature once and each entry by its digest alone; a
pointer is one object, so a reader sees the old generation or the new one, never a part of
either. manifest.py is the document and its one parse, publishing.py writes one, reading.py
resolves a pointer to a verified manifest and checks its objects, generation_cache.py is what
JAX calls in a reader's job.
"""
