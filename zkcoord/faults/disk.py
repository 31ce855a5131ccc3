"""A log directory whose disk the nemesis can fill: a small tmpfs where this process may mount one, else a file
size limit on the process that writes there.

``tmpfs`` mode (root, mount allowed): :meth:`LogDisk.fill` writes a filler file until the tmpfs is full, so
the node's next write fails with ENOSPC, as on a full disk. ``rlimit`` mode: :meth:`LogDisk.fill` lowers the
node's RLIMIT_FSIZE to a few bytes, so every write that would grow a file fails with EFBIG (Python ignores
SIGXFSZ, so the process lives). Both end with :meth:`LogDisk.heal`. The rlimit is per process, not per
directory: it fails the node's other file growth too, its log file on disk included (its lines while full are
lost). On tmpfs a write into a page the log file already has still succeeds, as on a real disk's last block:
the first append or two after a fill may pass.

IO: mount, files, prlimit.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

TMPFS = "tmpfs"
RLIMIT = "rlimit"
FILLER = ".disk-filler"
FILL_CHUNK_BYTES = 1 << 20
FULL_RLIMIT_BYTES = 1  # 0 would mean "no file at all"; 1 lets nothing real grow
MOUNT_TIMEOUT_S = 10.0


class LogDisk:
    """A directory for one node's log whose free space the nemesis can exhaust."""

    def __init__(self, directory: Path, size_mb: int = 64, mode: str | None = None):
        """``mode`` forces ``"rlimit"`` (or ``"tmpfs"``, failing if it cannot mount); None picks tmpfs if it can."""
        self.directory = Path(directory)
        self.size_mb = size_mb
        self.requested_mode = mode
        self.mode = mode or RLIMIT
        self._limits: dict[int, tuple[int, int]] = {}  # pid → its RLIMIT_FSIZE before fill

    def __enter__(self) -> LogDisk:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.requested_mode != RLIMIT:
            mounted = self._mount()
            if not mounted and self.requested_mode == TMPFS:
                raise OSError(errno.EPERM, f"cannot mount a tmpfs at {self.directory}")
            self.mode = TMPFS if mounted else RLIMIT
        log.info("log disk at %s mode=%s", self.directory, self.mode)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.mode != TMPFS:
            return
        unmounted = subprocess.run(["umount", str(self.directory)], capture_output=True, timeout=MOUNT_TIMEOUT_S)
        if unmounted.returncode != 0:  # a process still has files open there: detach now, free when it closes them
            subprocess.run(["umount", "-l", str(self.directory)], capture_output=True, timeout=MOUNT_TIMEOUT_S)

    def _mount(self) -> bool:
        if os.geteuid() != 0:
            return False
        try:
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs", str(self.directory)],
                capture_output=True,
                text=True,
                timeout=MOUNT_TIMEOUT_S,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.info("no tmpfs at %s: %s", self.directory, exc)
            return False
        if mounted.returncode != 0:
            log.info("no tmpfs at %s: %s", self.directory, mounted.stderr.strip())
        return mounted.returncode == 0

    def fill(self, pid: int) -> None:
        """Make the writes of ``pid`` into the directory fail from now on, until :meth:`heal`."""
        if self.mode == TMPFS:
            self._fill_tmpfs()
            return
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        self._limits.setdefault(pid, limits)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (FULL_RLIMIT_BYTES, limits[1]))

    def _fill_tmpfs(self) -> None:
        """Write zeros until ENOSPC, in halving chunks down to one byte, so not even a small write fits."""
        fd = os.open(self.directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = FILL_CHUNK_BYTES
            while size:
                try:
                    os.write(fd, bytes(size))
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    size //= 2
        finally:
            os.close(fd)

    def heal(self, pid: int | None) -> None:
        """Free the space again (tmpfs) or give ``pid`` its limit back (rlimit); a gone ``pid`` is no error."""
        with contextlib.suppress(FileNotFoundError):
            (self.directory / FILLER).unlink()
        if pid is None:
            return
        limits = self._limits.pop(pid, None)
        if limits is not None:
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)
