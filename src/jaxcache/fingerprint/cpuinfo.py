"""One processor's block of /proc/cpuinfo parsed into the model's Cpu: a pure parser (cpu.py
reads the file, and says why NOT_INSTRUCTIONS are left out).
"""

from __future__ import annotations

from jaxcache.fingerprint.model import Cpu

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

