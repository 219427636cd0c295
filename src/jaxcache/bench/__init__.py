"""`jaxcache bench`: cold versus warm in separate processes, measured from inside and outside."""
