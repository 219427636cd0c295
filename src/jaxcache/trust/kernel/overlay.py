"""An overlay mount's layers, from its options in /proc/self/mountinfo: which directories hold
what the merged directory shows, or why they cannot be known (data-only layers, redirects)."""

from __future__ import annotations

from jaxcache.mounts import Mount
from jaxcache.trust.kernel import sysfs

_OVERLAY_PARAMS = "/sys/module/overlay/parameters"


def split_lowerdir(value: str) -> list[str]:
    """lowerdir=a:b\\:c::d -> ["a", "b:c", "", "d"]: `\\` escapes, an empty item starts the
    data-only layers."""
    out, cur, i = [], [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            cur.append(value[i + 1])
            i += 2
            continue
        if ch == ":":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def overlay_layers(m: Mount) -> tuple[list[tuple[str, str]], str | None]:
    """(role, directory) for every layer of an overlay mount, or why they cannot be known."""
    layers: list[tuple[str, str]] = []
    data = False
    for opt in m.super_options:
        key, _, value = opt.partition("=")
        if key == "lowerdir":
            for item in split_lowerdir(value):
                if item == "":
                    data = True
                    continue
                layers.append(("data-only lower layer" if data else "lower layer", item))
        elif key in ("lowerdir+", "datadir+"):
            layers.append(("lower layer" if key == "lowerdir+" else "data-only lower layer",
                           value))
        elif key in ("upperdir", "workdir"):
            layers.append(("upper layer" if key == "upperdir" else "workdir", value))
    if not any(r.endswith("lower layer") for r, _ in layers):
        return [], "its lower layers are not listed in /proc/self/mountinfo"
    if any(r.startswith("data-only") for r, _ in layers):
        return [], ("it has data-only layers, whose files are found by redirects jaxcache does "
                    "not follow")
    redirect = m.option("redirect_dir") or _param("redirect_dir")
    metacopy = m.option("metacopy") or _param("metacopy")
    if redirect in ("on", "Y") or metacopy in ("on", "Y"):
        return [], ("redirect_dir or metacopy is on, so a directory or file may be served from "
                    "another path of a lower layer than the one jaxcache judges")
    return layers, None


def _param(name: str) -> str | None:
    return sysfs.read(f"{_OVERLAY_PARAMS}/{name}")
