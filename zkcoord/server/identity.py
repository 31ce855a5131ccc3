"""A coordinator node's identity: a random id kept in ``<log-dir>/node-<id>.identity``, locked while the node runs.

The node writes it into its ZooKeeper registration, so a restarted node recognises the registration its
killed predecessor left (same file, same identity) and waits for it to expire, while a second process with the
same node id is told apart: on another log directory its identity differs; on the same one it cannot take the
file's exclusive ``flock``. The lock goes with the process (the kernel drops it at exit, SIGKILL included); a
paused process (SIGSTOP, a frozen VM) keeps it, so its replacement refuses to start rather than race it.

IO: files. Must not import kazoo.
"""

import fcntl
import os
import uuid
from pathlib import Path

from zkcoord.errors import ConfigError


def identity_path(log_dir: str | os.PathLike, node_id: int) -> Path:
    return Path(log_dir) / f"node-{node_id}.identity"


class NodeIdentity:
    """The identity of node ``node_id`` on ``log_dir``, held (locked) from :meth:`acquire` to :meth:`release`."""

    def __init__(self, log_dir: str | os.PathLike, node_id: int):
        self.path = identity_path(log_dir, node_id)
        self.node_id = node_id
        self.value: str | None = None
        self._fd: int | None = None

    def acquire(self) -> str:
        """Lock the file and return the identity in it, writing a new one the first time; ConfigError if held."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(
                f"node id {self.node_id} is in use on this log directory: another process holds {self.path} "
                "(running, or paused); stop it before starting this node again"
            ) from None
        try:
            self.value = self._read(fd) or self._write_new(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self.value

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read(self, fd: int) -> str:
        return os.pread(fd, 256, 0).decode("ascii", "replace").strip()

    def _write_new(self, fd: int) -> str:
        value = uuid.uuid4().hex
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{value}\n".encode("ascii"), 0)
        os.fsync(fd)
        directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return value
