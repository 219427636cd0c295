"""What a job's backend says of itself: the accelerator part of a fingerprint (fingerprint/).

Asked only inside a process that has compiled something (asking earlier creates the backend,
which breaks a later jax.distributed.initialize). `device.client.platform_version` names the
CUDA and driver versions on GPU and the libtpu build on TPU, on every supported line; GPU
devices carry `compute_capability`. Anything missing is "" (the rule compares only what both
sides know).
"""

from __future__ import annotations

from jaxcache.fingerprint.model import Accelerator


def accelerator() -> Accelerator | None:
    """The default backend's facts, or None where JAX cannot say (no JAX, no backend)."""
    try:
        import jax

        device = jax.devices()[0]
        version = getattr(device.client, "platform_version", "") or ""
        capability = getattr(device, "compute_capability", "") or ""
        return Accelerator(str(device.platform), str(version)[:8192],
                           str(device.device_kind)[:256], str(capability)[:256])
    except Exception:  # noqa: BLE001 (JAX's many errors: no backend is no answer, not a crash)
        return None
