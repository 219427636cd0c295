"""`jaxcache bench`'s formats: text.py for people, json.py (jaxcache.bench/1, also --json),
markdown.py (--report), plot.py (--plot, a PNG chart), ranks.py (the per-rank table the text and
the report share), compare.py (bench --compare A B). The CLI hands the result to the ones asked
for (cli/bench.py); nothing here measures."""
