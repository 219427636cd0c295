"""An attacker's process keeping a handle on a cache file after the owner tightened it.

    holder.py MODE PATH [SOURCE]
MODE: write (O_WRONLY), read (O_RDONLY), path (O_PATH), map (O_RDWR, mapped shared and
writable, then the descriptor closed: only the mapping is left). SOURCE is read at start, while
the directory is still shared. Prints "ready"; on the line "write" from stdin, replaces the
file's bytes with SOURCE's through the held handle and prints "done"; exits at end of input.
"""

import ctypes
import mmap
import os
import sys
from pathlib import Path

mode, path = sys.argv[1], sys.argv[2]
source = Path(sys.argv[3]).read_bytes() if len(sys.argv) > 3 else b""
flags = {"write": os.O_WRONLY, "read": os.O_RDONLY, "path": os.O_PATH, "map": os.O_RDWR}[mode]
fd = os.open(path, flags)
mapped = None
if mode == "map":
    libc = ctypes.CDLL(None, use_errno=True)  # Python's mmap keeps a dup of the descriptor
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    mapped = libc.mmap(None, os.fstat(fd).st_size, mmap.PROT_READ | mmap.PROT_WRITE,
                       mmap.MAP_SHARED, fd, 0)
    if mapped in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap failed")
    os.close(fd)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "write":
        os.ftruncate(fd, 0)
        os.pwrite(fd, source, 0)
        print("done", flush=True)
