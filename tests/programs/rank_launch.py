"""Start N rank_job.py processes (argv[1], default 2) against a free localhost port."""

import socket
import subprocess
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
job = __file__.replace("rank_launch.py", "rank_job.py")
procs = [subprocess.Popen([sys.executable, job, str(port), str(i), str(n)]) for i in range(n)]
sys.exit(max(p.wait() for p in procs))
