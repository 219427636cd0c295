"""`jaxcache records`: the run records that pile up in the state dir, listed, pruned, summed.

`jaxcache run` (and `explain -- CMD`, twice) writes one JSON record per run into
~/.local/state/jaxcache/runs/. store.py finds them without following symlinks and accepts
only files that are jaxcache run records by name and by content; prune.py deletes only those;
stats.py adds them up like `ccache -s`. None of it needs JAX.
"""
