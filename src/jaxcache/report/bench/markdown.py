"""`jaxcache bench --report F.md`: the same facts as the terminal summary, as Markdown."""

from __future__ import annotations

from jaxcache.bench.trials import BenchResult
from jaxcache.report.bench import ranks as bench_ranks
from jaxcache.report.bench.text import cached, conclusions, table
from jaxcache.text import safe


def render(result: BenchResult, chart: str | None = None) -> str:
    cfg = result.config
    fp = result.samples[0].comparable if result.samples else None
    out = ["# jaxcache bench", "", f"Command: `{safe(' '.join(cfg.argv))}`", ""]
    if fp is not None:
        out += ["| | |", "|---|---|",
                f"| jax / jaxlib | {fp.jax} / {fp.jaxlib} |",
                f"| python | {fp.python} |",
                f"| platform | {fp.system} {fp.machine}, {fp.backend} ({fp.device_kind} "
                f"x{fp.device_count}) |",
                f"| XLA_FLAGS | {f'`{fp.xla_flags}`' if fp.xla_flags else '(none)'} |",
                f"| trials | {cfg.trials} (cold + {cfg.warm} warm each), priming run: "
                f"{'yes' if cfg.prime else 'no'} |", ""]
        modules = cached(result)
        if modules:
            out += ["Cached modules and their inputs (every shape is in the JSON result):", ""]
            out += [f"- {line}" for line in modules] + [""]
    for rows, note in ((table(result), None), (bench_ranks.rows(result), bench_ranks.NOTE)):
        if len(rows) > 1:
            if note:
                out += [f"Per rank ({note}):", ""]
            out.append("| " + " | ".join(rows[0]) + " |")
            out.append("|" + "---|" * len(rows[0]))
            out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
            out.append("")
    out += [f"- {line}" if not line.startswith("  ") else f"  - {line.strip()}"
            for line in conclusions(result)]
    if chart:
        out += ["", f"![phases, cold vs warm]({chart})"]
    return "\n".join(out) + "\n"
