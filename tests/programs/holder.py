"""An attacker's process keeping a handle on a cache file after the owner tightened it.

    holder.py MODE PATH [SOURCE]
MODE: write (O_WRONLY), read (O_RDONLY), path (O_PATH); map (O_RDWR, mapped shared and
writable, then the descriptor closed: only the mapping is left); map-ro (the same mapped
read-only: mprotect can make it writable again); map-rdonly (opened O_RDONLY, mapped shared
read-only: can never write); thread (O_WRONLY, opened by a thread that
first gave itself its own descriptor table, so /proc/PID/fd does not show it); hidden
(O_WRONLY, then non-dumpable: /proc/PID and its files then belong to root).
SOURCE is read at start, while the directory is still shared. Prints "ready"; on the line
"write" from stdin, replaces the file's bytes with SOURCE's through the held descriptor and
prints "done"; exits at end of input.
"""

import ctypes
import mmap
import os
import sys
import threading
from pathlib import Path

CLONE_FILES = 0x400
mode, path = sys.argv[1], sys.argv[2]
source = Path(sys.argv[3]).read_bytes() if len(sys.argv) > 3 else b""
libc = ctypes.CDLL(None, use_errno=True)


def hold_in_own_table(opened: threading.Event, done: threading.Event) -> None:
    if libc.unshare(CLONE_FILES) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_FILES)")
    os.open(path, os.O_WRONLY)
    opened.set()
    done.wait()


fd = None
if mode == "thread":
    opened, done = threading.Event(), threading.Event()
    threading.Thread(target=hold_in_own_table, args=(opened, done), daemon=True).start()
    if not opened.wait(30):
        sys.exit("the thread did not open the file")
elif mode in ("map", "map-ro", "map-rdonly"):
    fd = os.open(path, os.O_RDONLY if mode == "map-rdonly" else os.O_RDWR)
    libc.mmap.restype = ctypes.c_void_p  # Python's mmap module keeps a dup of the descriptor
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if mode == "map" else 0)
    mapped = libc.mmap(None, os.fstat(fd).st_size, prot, mmap.MAP_SHARED, fd, 0)
    if mapped in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap failed")
    os.close(fd)
else:
    flags = {"write": os.O_WRONLY, "hidden": os.O_WRONLY, "read": os.O_RDONLY,
             "path": os.O_PATH}[mode]
    fd = os.open(path, flags)
    if mode == "hidden" and libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "write":
        os.ftruncate(fd, 0)
        os.pwrite(fd, source, 0)
        print("done", flush=True)
