"""The run records kept in the state dir, as `jaxcache records` shows them: summary.py (one
record in numbers), totals.py (the pile added up: `records stats`), prune.py (`records
prune`: the oldest removed, only files that are jaxcache run records of yours). Where they
are kept and how each is found is records/record_dir.py's, which `jaxcache run` also uses."""
