"""Findings and verdict for `jaxcache net`, from the static plan and/or the live scan."""

from __future__ import annotations

from dataclasses import dataclass

from jaxcache.net.config import Plan
from jaxcache.net.sockets import Scan
from jaxcache.text import safe
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING, Finding

NOT_COVERED = ("cache permissions do not cover this: the network services are a trust "
               "boundary of their own, bounded only by network control and authentication")
REMEDY = ("bind to a private interface (JAX_COORDINATOR_BIND_ADDRESS=<cluster-network IP>:<port>"
          ", or 127.0.0.1:<port> on one host); allow the port only from the job's hosts "
          "(firewall or Kubernetes NetworkPolicy); on JAX >= 0.11 configure mTLS "
          "(JAX_MTLS_CERT_FILE, JAX_MTLS_KEY_FILE, JAX_MTLS_CA_FILE)")


# where to set the bind address, for the launcher the coordinator came from
BIND_HOW = {
    "slurm": ("under Slurm, in the batch script before srun: export "
              "JAX_COORDINATOR_BIND_ADDRESS=<first node's cluster-network IP>:{port} "
              "(only process 0, on the first node of the step, binds it)"),
    "ompi": ("under Open MPI: mpirun -x JAX_COORDINATOR_BIND_ADDRESS=<rank 0 host's "
             "cluster-network IP>:{port}"),
    "k8s": ("on Kubernetes: a NetworkPolicy that admits port {port} only from the job's pods, "
            "or JAX_COORDINATOR_BIND_ADDRESS=<pod IP>:{port} in process 0's pod spec"),
    "tpu": ("on Cloud TPU: a VPC firewall rule that admits port {port} only from the slice's "
            "workers"),
}


def remedy(p: Plan | None) -> str:
    """The general remedy, led by how to do it for the launcher JAX took the address from."""
    how = BIND_HOW.get(p.source or "") if p is not None else None
    return (how.format(port=p.port) + "; in general: " + REMEDY) if how and p else REMEDY


@dataclass(frozen=True, slots=True)
class NetReport:
    plan: Plan | None
    scan: Scan | None
    findings: tuple[Finding, ...]

    @property
    def exposed(self) -> bool:
        return any(f.effect == UNSAFE for f in self.findings)

    @property
    def unverifiable(self) -> bool:
        """Some process that may be a JAX service could not be inspected, and the user did
        not accept a partial answer: fail closed, as the audit does."""
        return any(f.effect == UNVERIFIABLE for f in self.findings)

    @property
    def exit_code(self) -> int:
        return 1 if self.exposed or self.unverifiable else 0


def _plan_findings(p: Plan) -> list[Finding]:
    out = []
    version = p.jax_version or "unknown"
    if p.source is None:
        out.append(Finding("net.no-coordinator", NOTE,
                           "no coordinator address in this environment (JAX_COORDINATOR_ADDRESS "
                           "or a Slurm / Open MPI / Kubernetes / Cloud TPU setup): a job started "
                           "here passes it in code, or runs on one process"))
        return out
    auth = ("mTLS configured" if p.mtls_configured else
            f"no authentication and no encryption on JAX {version}")
    where = {"wildcard": "every interface", "loopback": "loopback only",
             "specific": "one interface"}[p.bind_class or "wildcard"]
    default = "" if p.bind_explicit else " (JAX's default: JAX_COORDINATOR_BIND_ADDRESS is unset)"
    text = (f"coordinator {safe(p.coordinator or '?')} from {p.source}: process 0 will bind the "
            f"coordination service to {safe(p.bind or '?')} - {where}{default} - with {auth}")
    if p.bind_class in ("wildcard", "specific") and not p.mtls_configured:
        text += ("; anyone who can reach the port can join the job as a process and read and "
                 "write its key-value store (topology, collective bootstrap data")
        text += (", and with jax_share_binary_between_hosts the compiled executables the other "
                 "processes load)" if p.share_binary else ")")
        out.append(Finding("net.coordinator-exposed", UNSAFE, text, p.bind, remedy(p)))
    else:
        out.append(Finding("net.coordinator", NOTE, text + (
            "; other local users can still reach a loopback port"
            if p.bind_class == "loopback" else ""), p.bind))
    return out


def _scan_findings(s: Scan) -> list[Finding]:
    out = []
    for li in s.listeners:
        where = f"{li.address}:{li.port}" if ":" not in li.address else f"[{li.address}]:{li.port}"
        via = ", ".join(li.reachable) or "no interface"
        base = (f"process {li.pid} ({safe(li.process)}, user {li.user}): {li.service} listens "
                f"on {where} ({li.kind}; reachable from {via})")
        if li.kind != "loopback" and not li.mtls:
            out.append(Finding("net.listener-exposed", UNSAFE,
                               base + ", unauthenticated and unencrypted", where, REMEDY))
        else:
            out.append(Finding("net.listener", NOTE, base + (
                "; other local users can still reach a loopback port"
                if li.kind == "loopback" else "; protected by mTLS"), where))
    if not s.processes:
        out.append(Finding("net.no-jax-process", NOTE, "no JAX process found to inspect"))
    who = ", ".join(f"{n} of {safe(user)}" for user, n in s.uninspected_by_user)
    blind = []
    if s.uninspected:
        blind.append(f"{s.uninspected} process(es) could not be inspected ({who})")
    if s.hidden:
        blind.append(s.hidden)
    if blind and s.partial:
        out.append(Finding("net.partial", WARNING,
                           "partial answer (--partial): " + "; ".join(blind) + ": whatever JAX "
                           "services they run are not in this report"))
    elif blind:
        out.append(Finding("net.uninspected", UNVERIFIABLE,
                           "; ".join(blind) + ": any of them may be a JAX service listening "
                           "beyond loopback, so nothing can be said to be unreachable",
                           None, "run as root (or as those users) to see every process, or "
                           "pass --partial to accept an answer about the processes you can see"))
    return out


def assess(plan: Plan | None, scan: Scan | None, env: dict[str, str]) -> NetReport:
    findings = []
    if plan is not None:
        findings += _plan_findings(plan)
        mtls_set = [v for v in ("JAX_MTLS_CERT_FILE", "JAX_MTLS_KEY_FILE", "JAX_MTLS_CA_FILE")
                    if env.get(v)]
        if mtls_set and not plan.mtls_supported:
            findings.append(Finding(
                "net.mtls-ignored", WARNING,
                f"{', '.join(mtls_set)} set, but JAX {plan.jax_version} has no mTLS for the "
                "coordination service: the variables are ignored and traffic is plaintext",
                None, "upgrade JAX to a version with mTLS, or rely on network isolation"))
    if scan is not None:
        findings += _scan_findings(scan)
    findings.append(Finding("net.profiler", NOTE,
                            "jax.profiler.start_server(port) also listens on every interface, "
                            "unauthenticated: start it only on trusted networks, and stop it "
                            "(jax.profiler.stop_server) when done"))
    findings.append(Finding("net.not-covered", NOTE, NOT_COVERED))
    return NetReport(plan, scan, tuple(findings))
