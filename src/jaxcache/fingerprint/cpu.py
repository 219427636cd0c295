"""The host's CPU: architecture, model and the instruction-set features compiled code may use.

XLA compiles CPU code for the host's target machine (its features: AVX-512, AMX, SVE...). An
entry compiled where a feature exists and loaded where it does not can die of SIGILL or take
another code path, and XLA's loader only logs it (JAX issue 38445, XLA issue 44565). The kernel
lists the features in /proc/cpuinfo (`flags` on x86, `Features` on Arm); a few of those words
are not instructions at all but facts about the machine or the kernel (a hypervisor, a steady
clock): they are left out (NOT_INSTRUCTIONS), so that a VM and bare metal of one CPU compare
equal. Everything else counts: a word we do not know is kept, since leaving out a real
instruction set could let an entry load where it cannot run (fail closed: a needless miss at
worst).

Only the first processor's block is read (the kernel builds the file per CPU as it is read, so
a 128-core host costs no more than a 2-core one); a host whose cores differ in features
(big.LITTLE) is judged by its first.
"""

from __future__ import annotations

import os

from jaxcache.fingerprint.model import Cpu

CPUINFO = "/proc/cpuinfo"
_MAX = 64 << 10
# words of x86's `flags` that describe the machine, the clock or the kernel, not instructions
NOT_INSTRUCTIONS = frozenset({
    # the machine and its clock
    "hypervisor", "constant_tsc", "nonstop_tsc", "tsc_known_freq", "tsc_reliable",
    "tsc_deadline_timer", "tsc_adjust", "tsc_scale", "arch_perfmon", "rep_good", "nopl",
    "xtopology", "cpuid", "cpuid_fault", "ht", "acpi", "aperfmperf", "amd_dcm", "dtherm",
    "ida", "arat", "pln", "pts", "hwp", "hwp_notify", "hwp_act_window", "hwp_epp",
    "hwp_pkg_req", "epb", "cpb", "hw_pstate", "dts", "est", "tm", "tm2", "pbe", "xtpr",
    "pdcm", "dca", "ss", "hfi", "overflow_recov", "succor", "smca", "wdt", "ibs", "extapic",
    "perfctr_core", "perfctr_nb", "perfctr_llc", "intel_pt", "bts", "ds_cpl", "cat_l3",
    "cdp_l3", "cqm", "cqm_llc", "cqm_occup_llc", "cqm_mbm_total", "cqm_mbm_local", "mba",
    # paging, interrupts and machine checks: the kernel's, never in compiled user code
    "vme", "de", "pse", "pae", "mce", "apic", "mtrr", "pge", "mca", "pat", "pse36", "x2apic",
    "pdpe1gb", "la57", "nx", "invpcid_single", "split_lock_detect", "core_capabilities",
    # virtualization
    "vmx", "smx", "svm", "tpr_shadow", "vnmi", "flexpriority", "ept", "vpid", "ept_ad",
    "ept_5level", "vmmcall", "decodeassists", "pausefilter", "pfthreshold", "svm_lock",
    "nrip_save", "vmcb_clean", "flushbyasid", "avic", "v_vmsave_vmload", "vgif", "v_spec_ctrl",
    "sev", "sev_es", "sme", "tme",
    # speculation mitigations the kernel reports
    "pti", "ibrs", "ibpb", "stibp", "ssbd", "ibrs_enhanced", "md_clear", "flush_l1d",
    "arch_capabilities"})


def read(path: str = CPUINFO) -> Cpu:
    """The first processor's vendor, model and instruction features ("" and none where the
    file is missing or unreadable: the rule then compares nothing it does not know)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return Cpu()
    text = b""
    try:
        while b"\n\n" not in text and len(text) < _MAX:
            chunk = os.read(fd, 8192)
            if not chunk:
                break
            text += chunk
    except OSError:
        return Cpu()
    finally:
        os.close(fd)
    return parse(text.split(b"\n\n", 1)[0].decode("utf-8", "replace"))


def parse(block: str) -> Cpu:
    """One processor's block of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in block.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            fields.setdefault(name.strip(), " ".join(value.split()))
    vendor = fields.get("vendor_id") or fields.get("CPU implementer", "")
    model = fields.get("model name") or " ".join(
        f"{k} {fields[k]}" for k in ("CPU architecture", "CPU variant", "CPU part")
        if k in fields)
    words = (fields.get("flags") or fields.get("Features") or "").split()
    return Cpu(vendor[:256], model[:256], frozenset(w for w in words
                                                    if w not in NOT_INSTRUCTIONS))


def machine() -> str:
    """The architecture (uname -m): an entry never loads on another."""
    return os.uname().machine  # what platform.machine() reads, without importing platform
