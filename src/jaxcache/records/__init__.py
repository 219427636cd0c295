"""Run records: one per `jaxcache run`, and the pile of them in the state dir.

building/ builds the record (`jaxcache.run/1`: what the probes saw) and run_record.py runs
the job and writes it; run_document.py reads it back typed, reading.py reads its
processes, ranks and modules, rank_views.py what each rank saw of the audited cache,
used_dirs.py the directories JAX really used. `jaxcache records` works on the pile that
`jaxcache run` (and `explain -- CMD`, twice) leaves in ~/.local/state/jaxcache/runs/: record_dir.py
finds them without following symlinks and accepts only files that are jaxcache run records by
name and by content; prune.py deletes only those; totals.py adds them up like `ccache -s`. None
of it needs JAX.
"""
