"""Start two dist_worker.py processes against a free localhost port."""

import socket
import subprocess
import sys

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
procs = [subprocess.Popen([sys.executable, sys.argv[1], str(port), str(i)]) for i in range(2)]
sys.exit(max(p.wait() for p in procs))
