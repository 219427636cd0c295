"""`jaxcache explain`: why each module was or was not cached, across ranks and sealed buckets."""
