"""The run lock: an ``flock`` on ``.<run id>.lock`` beside the archive, held by the process writing the run.

The kernel releases an ``flock`` when its process dies (``kill -9`` included), so a lock that is held means
a live writer (:mod:`evotrainer.run.resume` refuses to write or resume such a run; the archive's readers,
:mod:`evotrainer.archive.store`, then never open the file as immutable).

Some filesystems have no ``flock``: Lustre mounted without ``flock``, NFS mounted with ``nolock``, some
FUSE file systems. There the call fails with ``ENOSYS`` or ``ENOLCK`` rather than ``EWOULDBLOCK``
(filelock#67 reports the same on Lustre), which is not "another process holds it": the run goes on with a
warning naming the filesystem (from ``/proc/mounts``), and nothing then keeps a second process from
writing the same run.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no run locks
    fcntl = None  # type: ignore[assignment]

__all__ = ["NO_FLOCK_ERRNOS", "filesystem_of", "lock_path", "probe", "take"]

log = logging.getLogger(__name__)

NO_FLOCK_ERRNOS = frozenset({errno.ENOSYS, errno.ENOLCK})
"""``flock`` errors that mean the filesystem has no locks (Linux flock(2): ENOLCK; Lustre without the
``flock`` mount option: ENOSYS), not that another process holds the lock."""

_HELD_ERRNOS = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})
_MOUNTS = Path("/proc/mounts")


def lock_path(archive: str | Path, run_id: str) -> Path:
    """The lock file a running process holds for ``run_id`` (beside its archive)."""
    return Path(archive).parent / f".{run_id}.lock"


def _unescape(field: str) -> str:
    """A /proc/mounts field with its octal escapes (``\\040`` for a space) decoded."""
    return field.encode("latin-1").decode("unicode_escape") if "\\" in field else field


def filesystem_of(path: str | Path) -> str:
    """``path``'s filesystem for a message: ``"lustre mounted at /scratch (from 10.0.0.1@o2ib:/fs; options
    rw,localflock)"``, the mount whose mount point is the longest prefix of ``path``'s real path in
    ``/proc/mounts``; ``"an unknown filesystem (...)"`` where that table cannot be read."""
    real = os.path.realpath(path)
    try:
        lines = _MOUNTS.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"an unknown filesystem ({_MOUNTS} unreadable: {exc.strerror or exc})"
    best: tuple[str, str, str, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        source, mount, fstype, options = (_unescape(f) for f in fields[:4])
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) >= len(best[1])):  # later lines stack over earlier ones
            best = (source, mount, fstype, options)
    if best is None:
        return f"an unknown filesystem (no entry of {_MOUNTS} holds {real})"
    source, mount, fstype, options = best
    return f"{fstype} mounted at {mount} (from {source}; options {options})"


def _flock(fd: int, exclusive: bool) -> bool | None:
    """Try ``flock`` without blocking: True taken, False another process holds it, None the filesystem
    has none (:data:`NO_FLOCK_ERRNOS`).

    Raises:
        OSError: any other ``flock`` error.
    """
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _HELD_ERRNOS:
            return False
        if exc.errno in NO_FLOCK_ERRNOS:
            return None
        raise
    return True


def take(lock: Path) -> int | None:
    """Take ``lock`` exclusively for this process (created when missing, with its folder).

    Returns:
        The open descriptor holding it (close it to release), or None when another process holds it.
        On a filesystem without ``flock`` the descriptor is returned unlocked and a warning names the
        filesystem (module docstring).

    Raises:
        OSError: the file cannot be created, or ``flock`` fails otherwise (the message names the file).
    """
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        got = _flock(fd, exclusive=True)
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, f"cannot lock {lock}: {exc.strerror}") from None
    if got is False:
        os.close(fd)
        return None
    if got is None and fcntl is not None:
        log.warning("run lock: %s is on %s, which has no flock; the run goes on unlocked, so nothing stops "
                    "a second process from writing the same run (filelock#67)", lock, filesystem_of(lock.parent))
    return fd


def probe(lock: Path) -> bool | None:
    """Whether a live process holds ``lock``: True, False (also when the file is missing), or None when
    that cannot be known (the filesystem has no ``flock``, or the file cannot be opened or locked)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        got = _flock(fd, exclusive=False)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if got is None else not got
