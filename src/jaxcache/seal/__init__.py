"""A sealed cache: entries signed with Ed25519, loaded only when a trusted key signed them.

Permission bits stop being a trust boundary on NFS, buckets and team-shared directories; a
signature does not care who could write the file. See docs/how-to/sealed-cache.md.
"""
