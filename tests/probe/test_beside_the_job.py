"""What `jaxcache run` does while its job runs happens on threads (the record's model imported,
a sealed reader's bucket listed). Such a thread must never take a signal that is the job's:
one it took would wait there until the job ended, or, while the main thread holds them
during the spawn, end jaxcache with its default action and leave the job running."""

from __future__ import annotations

import signal

from support.users import isolation

from jaxcache.probe import launch


def test_a_thread_beside_the_job_keeps_the_jobs_signals_blocked():
    seen: list[set[int]] = []
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    launch.beside(lambda: seen.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, []))),
                  "test-beside").join(timeout=30)
    assert seen, "the thread never ran"
    assert {signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP} <= seen[0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before  # the caller's mask is back


def test_the_record_model_is_imported_beside_the_job_not_before_it(tmp_path):
    """The job starts before the record's model is imported: `started` runs once the job has
    been spawned, and that is where `run` starts importing it."""
    import subprocess
    import sys

    out = tmp_path / "order"
    probe = ("import sys, os\n"
             "from jaxcache.probe import launch\n"
             "real = launch.beside\n"
             "def beside(work, name):\n"
             "    done = 'jaxcache.records.run_document' in sys.modules\n"
             f"    open({str(out)!r}, 'a').write(f'{{name}} model-before={{done}}\\n')\n"
             "    return real(work, name)\n"
             "launch.beside = beside\n"
             "from jaxcache.cli import main\n"
             "sys.argv = ['jaxcache', 'run', '-q', '--cache-dir', sys.argv[1], '--record',\n"
             "            sys.argv[2], '--', '/bin/true']\n"
             "main()\n")
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    proc = subprocess.run([sys.executable, "-c", probe, str(cache), str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "s"),
                               **isolation()})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text() == "jaxcache-imports model-before=False\n"
    assert (tmp_path / "r.json").stat().st_size > 0  # and the record was written with it


def test_a_run_where_no_thread_can_start_still_runs_its_job_and_writes_its_record(tmp_path):
    """A process or cgroup limit (ulimit -u, pids.max) can refuse a thread: the job it has
    already started runs on, and the record's model is imported after it instead."""
    import subprocess
    import sys

    ran = tmp_path / "ran"
    refuse = ("import sys, threading\n"
              "def refused(self):\n    raise RuntimeError(\"can't start new thread\")\n"
              "threading.Thread.start = refused\n"
              "from jaxcache.cli import main\n"
              "sys.argv = ['jaxcache', 'run', '-q', '--cache-dir', sys.argv[1], '--record',\n"
              "            sys.argv[2], '--', 'sh', '-c', 'echo ran > ' + sys.argv[3]]\n"
              "main()\n")
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    proc = subprocess.run([sys.executable, "-c", refuse, str(cache), str(tmp_path / "r.json"),
                           str(ran)], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "s"),
                               **isolation()})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ran.read_text() == "ran\n"
    assert (tmp_path / "r.json").stat().st_size > 0
