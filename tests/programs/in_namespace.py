"""Run steps inside the caller's private mount namespace; print one JSON line of results.

    unshare -m --propagation private -- python in_namespace.py STEPS.json

STEPS.json is a list of steps, run in order:
  {"mount": [argv...]}                        mount something (fails the whole run if it fails)
  {"run": [argv...], "env": {...}}            run a command, record rc/stdout/stderr
  {"losetup": IMAGE}                          attach a loop device with partition scan; later
                                              argv items have "{loop}" replaced by its path;
                                              detached (lazily, when unmounted) at the end
  {"node_perm": MOUNT_POINT, "group": G, "mode": "0660"}
                                              chgrp/chmod the block device node the mount at
                                              MOUNT_POINT comes from; restored when the run ends
Every mount disappears with the namespace; changed device nodes are restored in `finally`.
"""

import json
import os
import shutil
import subprocess
import sys


def _source_of(point: str) -> str:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            if left.split()[4] == point:
                return right.split()[1]
    raise SystemExit(f"no mount at {point}")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        steps = json.load(f)
    results, restore, loops = [], [], []

    def argv(items: list[str]) -> list[str]:
        return [i.replace("{loop}", loops[-1]) if loops else i for i in items]

    try:
        for step in steps:
            if "losetup" in step:
                proc = subprocess.run(["losetup", "-P", "-f", "--show", step["losetup"]],
                                      capture_output=True, text=True, check=True)
                loops.append(proc.stdout.strip())
                results.append({"loop": loops[-1]})
            elif "mount" in step:
                proc = subprocess.run(argv(step["mount"]), capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"mount failed: {step['mount']}: {proc.stderr.strip()}")
                results.append({"mount": step["mount"]})
            elif "node_perm" in step:
                node = _source_of(step["node_perm"])
                st = os.stat(node)
                restore.append((node, st.st_uid, st.st_gid, st.st_mode & 0o7777))
                shutil.chown(node, group=step["group"])
                os.chmod(node, int(step["mode"], 8))
                results.append({"node": node})
            else:
                env = {**os.environ, **step.get("env", {})}
                proc = subprocess.run(argv(step["run"]), capture_output=True, text=True, env=env,
                                      timeout=600)
                results.append({"rc": proc.returncode, "stdout": proc.stdout,
                                "stderr": proc.stderr})
    finally:
        for loop in loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        for node, uid, gid, mode in restore:
            os.chown(node, uid, gid)
            os.chmod(node, mode)
    print(json.dumps(results))


main()
