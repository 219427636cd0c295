"""jaxcache's own documents: what kinds there are, how they are written, read back and claimed.

kinds.py is the table of document kinds (schema id, schema file) and the one envelope every
document starts with; read.py reads a document back through the trusted-input loader and
checks what its readers use (with validate.py's typed checks); claim.py claims an output file
before any work and writes it whole, never over someone else's; synced.py writes a new file's
bytes whole and fsyncs them before it is renamed or linked into place; schemas/ holds each
kind's JSON Schema, shipped with the package.
"""
