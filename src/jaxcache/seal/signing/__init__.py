"""The signature rule: signature files, the digest they cover, build claims, orphan signatures,
and whether a reader would ever hit an entry."""
