"""hetsched on real Linux: small real programs, a user-space agent that applies
hetsched's agent policies to real processes, and simulator-versus-real
validation. See ``docs/real-linux.md``.

Everything here runs real processes on the host, so it needs Linux; the
agent's cgroup features need root. Nothing is imported by ``hetsched``
itself: the simulator keeps working on any platform.
"""

from __future__ import annotations

__all__ = ["LinuxError"]


class LinuxError(Exception):
    """A real-Linux command that cannot be carried out: missing permission,
    program, file or kernel feature. The message says what and how to fix it."""
