"""Stand-in for the `filelock` package, put on the path only when it is not installed:
JAX's own LRUCache needs it for jax_compilation_cache_max_size, and the parity tests run
JAX's real eviction code against it (an flock, as filelock.FileLock takes on Linux)."""

import fcntl
import os
import time


class Timeout(TimeoutError):
    pass


class FileLock:
    def __init__(self, path, timeout=-1):
        self.path, self._fd = str(path), None

    def acquire(self, timeout=None):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        deadline = time.monotonic() + (10 if timeout is None else timeout)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise Timeout(self.path) from None
                time.sleep(0.01)

    def release(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


SoftFileLock = FileLock
