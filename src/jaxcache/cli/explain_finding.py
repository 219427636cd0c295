"""`jaxcache explain-finding [CODE]`: what a finding code means, why it matters, what to do."""

from __future__ import annotations

import argparse

from jaxcache.cli import common


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", metavar="CODE", nargs="?",
                   help="A finding code as reports and JSON documents give it "
                        "(findings[].code), e.g. writer.untrusted. Without one: every code.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """What a finding code means, why it matters and what to do.

      jaxcache explain-finding writer.untrusted    one code: effect, meaning, why, what to do
      jaxcache explain-finding                     every code, one line each
      jaxcache explain-finding --format json CODE  the same as a document

    Every finding in an audit, `net` or `run` report carries a stable code (the JSON's
    findings[].code); its message and remedy say the particulars of one case, this says the
    general case. The text is the table docs/reference/finding-codes.md is written from.

    Exit code: 0; 2 an unknown code (with the codes it may mean).
    """
    from jaxcache.report import finding_codes as report
    from jaxcache.text import quoted
    from jaxcache.trust import finding_codes as catalogue

    if args.code is None:
        common.finish(args, report.render_json(catalogue.CODES) if args.fmt == "json"
                      else report.render_all(), 0)
    found = catalogue.lookup(args.code)
    if found is None:
        near = catalogue.close_to(args.code)
        hint = (f"; did you mean {' or '.join(near)}?" if near else "") + \
            " (`jaxcache explain-finding` lists every code)"
        common.usage(args, f"unknown finding code {quoted(args.code)}{hint}")
    common.finish(args, report.render_json((found,)) if args.fmt == "json"
                  else report.render_one(found), 0)
