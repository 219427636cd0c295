"""Errors that end a command with one clear line instead of a traceback."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.judgement.audit import AuditReport


class JaxcacheError(Exception):
    """Bad input or an environment jaxcache cannot work in: exit code 2."""

    exit_code = 2


class PolicyError(JaxcacheError):
    """The policy file is missing, unsafe or malformed."""


class UntrustedCacheError(JaxcacheError):
    """The audit did not find the cache directory PRIVATE or SHARED-BY-POLICY."""

    exit_code = 1

    def __init__(self, report: AuditReport, action: str = "cache") -> None:
        # action: "cache" (refusing cache DIR) or "to seal"
        from jaxcache.text import safe, wrap

        self.report = report
        failing = [f for f in report.findings if f.effect.fails]
        # a sealed reader is refused for its keys, not for who can write (that is covered)
        names = [] if failing and all(f.code.startswith("seal.") for f in failing) else \
            sorted({str(w.principal) for w in report.untrusted})
        shown = ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more"
                                             if len(names) > _NAMED else "")
        who = f" ({shown})" if names else ""
        reasons = [f.message for f in failing]
        # the first line answers alone; why, one wrapped bullet per reason, under it
        lines = [f"refusing {action} {safe(report.requested)}: verdict "
                 f"{report.verdict.value}{who}"]
        for text in reasons[:_REASONS]:
            lines += wrap(text, "  - ", limit=_WIDTH)
        if len(reasons) > _REASONS:
            lines.append(f"  - and {len(reasons) - _REASONS} more: jaxcache audit "
                         f"{safe(report.requested)}")
        remedies = [f.remedy for f in failing if f.remedy]
        origin = [f.remedy for f in failing if f.code.startswith("origin.") and f.remedy]
        if origin or remedies:  # every refusal says its way out; an origin one first
            lines += wrap(f"what to do: {(origin or remedies)[0]}", "  ", limit=_WIDTH)
        signed = report.inventory.count("signature") if report.inventory is not None else 0
        if signed and action == "cache" and not any(f.code.startswith("seal.")
                                                    for f in report.findings):
            lines += wrap(f"it holds {signed} signature file{'s' if signed != 1 else ''}: if "
                          "it is a sealed cache, others may write it and its readers take only "
                          "signed entries: jaxcache run --sealed --trusted-key KEY "
                          "(docs/how-to/sealed-cache.md)", "  ", limit=_WIDTH)
        super().__init__("\n".join(lines))


_NAMED, _REASONS, _WIDTH = 3, 4, 100  # writers named, reasons listed, columns of those
