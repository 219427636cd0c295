"""Errors that end a command with one clear line instead of a traceback."""

from __future__ import annotations


class JaxcacheError(Exception):
    """Bad input or an environment jaxcache cannot work in: exit code 2."""

    exit_code = 2


class PolicyError(JaxcacheError):
    """The policy file is missing, unsafe or malformed."""


class UntrustedCacheError(JaxcacheError):
    """The audit did not find the cache directory PRIVATE or SHARED-BY-POLICY."""

    exit_code = 1

    def __init__(self, report) -> None:  # an AuditReport; untyped to keep this module light
        from jaxcache.display import safe

        self.report = report
        untrusted = ", ".join(sorted(report.writer_names("untrusted"))) or "unknown writers"
        reasons = "; ".join(f.message for f in report.findings
                            if f.effect in ("unsafe", "unverifiable"))[:600]
        super().__init__(f"refusing cache {safe(report.requested)}: verdict "
                         f"{report.verdict.value} ({untrusted}): {reasons}")
