"""A slow fsync for one process: the ``fsync_delay.c`` shim, compiled once and loaded with LD_PRELOAD.

:func:`fsync_delay_library` compiles the shim with the machine's C compiler into the cache beside the peers'
(``~/.cache/zkcoord/faults``, or ``faults`` beside ``$ZKCOORD_PEERS_CACHE``), named by the source's digest and
under a file lock, so concurrent test runs compile it once. :class:`SlowFsync` starts a process with the shim
(its :meth:`~SlowFsync.env`) and slows or heals its fsync and fdatasync by writing or removing the control
file the shim reads on every call. Without a compiler there is no shim: ``available`` is False and the env
is empty, so a campaign runs without this fault.

IO: files and a compiler subprocess.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

from zkcoord import env, peers

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("fsync_delay.c")
COMPILE_TIMEOUT_S = 60.0


def cache_directory() -> Path:
    """The faults cache, a sibling of the peers' cache."""
    return peers.cache_root().parent / "faults"


@functools.cache
def fsync_delay_library() -> Path | None:
    """The compiled shim, compiling it first if the cache lacks it; None (logged) when it cannot be built."""
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        log.warning("no C compiler (cc) on PATH: slow fsync is not available")
        return None
    source = SOURCE.read_bytes()
    directory = cache_directory()
    library = directory / f"fsync_delay-{hashlib.sha256(source).hexdigest()[:12]}.so"
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.is_file():
            return library
        building = library.with_suffix(f".so.{os.getpid()}")
        command = [compiler, "-shared", "-fPIC", "-O2", "-o", str(building), str(SOURCE), "-ldl"]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            log.warning("cannot compile %s: slow fsync is not available: %s", SOURCE.name, detail)
            with contextlib.suppress(OSError):
                building.unlink()
            return None
        building.replace(library)
        log.info("compiled %s into %s", SOURCE.name, library)
        return library


class SlowFsync:
    """The fsync delay of the processes started with :meth:`env`, controlled through ``control_file``."""

    def __init__(self, control_file: Path):
        self.control_file = Path(control_file)
        self.library = fsync_delay_library()

    @property
    def available(self) -> bool:
        return self.library is not None

    def env(self) -> dict:
        """The environment a process needs for the shim; empty without a compiled shim."""
        if self.library is None:
            return {}
        return {"LD_PRELOAD": str(self.library), env.FSYNC_DELAY_FILE: str(self.control_file)}

    def slow(self, delay_ms: int) -> None:
        """Every fsync and fdatasync of those processes sleeps ``delay_ms`` first, from now until :meth:`heal`."""
        self.control_file.parent.mkdir(parents=True, exist_ok=True)
        staged = self.control_file.with_name(self.control_file.name + ".new")
        staged.write_text(f"{int(delay_ms)}\n")
        staged.replace(self.control_file)  # the shim never reads a half-written number

    def heal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.control_file.unlink()
