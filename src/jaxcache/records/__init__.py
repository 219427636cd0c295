"""Run records: one per `jaxcache run`, and the pile of them in the state dir.

run_document.py is the record's one model (`jaxcache.run/1`: RunRecord, to_json and
from_json); builder.py builds it from what the probes saw (probe_output.py reads each probe's
document once), dir_snapshot.py is what the cache directory held, run_record.py runs the job and
writes it, rank_views.py judges what each rank saw of the audited cache, used_dirs.py the
directories JAX really used. `jaxcache records` works on the pile that
`jaxcache run` (and `explain -- CMD`, twice) leaves in ~/.local/state/jaxcache/runs/: record_dir.py
finds them without following symlinks and accepts only files that are jaxcache run records by
name and by content; kept/prune.py deletes only those; kept/totals.py adds them up like
`ccache -s`. None of it needs JAX.
"""
