"""Base classes for scheduling policies and agents written in Python.

Subclass :class:`Scheduler` (dispatch level, shaped like Linux sched_ext) or
:class:`Agent` (a periodic user-level daemon) and pass an instance to
:func:`hetsched.run`, or name the class in a scenario file as
``scheduler = "python:package.module:ClassName"``. The engine calls the methods
below by name. Every call gets ``cx``, a :class:`hetsched._core.Context` that is
valid only during that call: read engine state through it and record requests
on it (``cx.resched``, ``cx.migrate``, ``cx.arm_timer`` ...); the engine
validates and applies them after the method returns. A policy never changes
engine state directly.

Python policies are slower than the built-in Rust ones, which is the price of
prototyping in Python; ``hetsched.examples_policies`` has two short examples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._core import Context

__all__ = ["ENQUEUE_FLAGS", "Agent", "Scheduler"]

#: The ``flags`` strings that ``select_cpu`` and ``enqueue`` receive.
ENQUEUE_FLAGS = ("new", "wakeup", "preempted", "migrated", "affinity")


class Scheduler:
    """A dispatch-level scheduling policy.

    The policy owns its run queues; the engine owns tasks, CPUs and time.
    Tasks and CPUs are integer ids (``0 .. cx.ntasks - 1``, ``0 .. cx.ncpus - 1``).

    Protocol, in the order the engine calls it:

    - ``init(cx)`` once, before the first event.
    - When a task becomes runnable: ``select_cpu(cx, task, prev_cpu, flags)``
      returns the CPU the task is assigned to, then ``enqueue(cx, task, cpu, flags)``
      puts it on the policy's queues. ``flags`` says why: ``"new"`` (first
      start), ``"wakeup"`` (end of a sleep or I/O), ``"preempted"``,
      ``"migrated"`` (after ``cx.migrate``) or ``"affinity"`` (its affinity
      changed).
    - When a running task is preempted (``cx.resched`` on its CPU, or a tick
      that asked for it) the engine calls ``stopping(cx, task, cpu,
      runnable=True)`` and then ``enqueue(cx, task, task_cpu, flags)`` with
      ``flags="preempted"`` (same CPU), ``"migrated"`` (a ``cx.migrate`` moved
      it while it ran) or ``"affinity"`` (its new affinity excludes the CPU).
      When it blocks, sleeps or exits it calls ``stopping(..., runnable=False)``
      and does not enqueue it.
    - ``dequeue(cx, task, cpu)`` removes a queued task whose new affinity
      excludes ``cpu``; the engine then calls ``select_cpu`` and ``enqueue``
      with ``flags="affinity"``. (A policy that moves a queued task itself
      updates its own queues and calls ``cx.migrate``.)
    - ``pick_next(cx, cpu)`` chooses the next task for ``cpu`` or returns
      ``None``. It must remove the task it returns from the policy's own
      queues; the engine then calls ``running(cx, task, cpu)``.
    - When a CPU would go idle the engine calls ``balance(cx, cpu)`` (pull work
      from other queues here) and then ``pick_next`` once more; if that also
      returns ``None`` the CPU idles until ``cx.resched(cpu)`` wakes it.
    - ``tick(cx, cpu, task)`` on the scheduler tick of a busy CPU, only for
      CPUs that asked with ``cx.want_tick(cpu, True)`` (a tickless kernel).
    - ``on_timer(cx, token)`` when a timer armed with ``cx.arm_timer`` fires.
    - ``reweight(cx, task)`` after a task's nice value (and so weight) changed.
    - ``on_reconfigured(cx, info)`` when a reconfiguration of dynamic
      processors completes (one asked for with ``cx.reconfigure`` or one the
      scenario scripts): ``info`` is ``{"id", "op", "cpus", "mechanism",
      "start_ns"}``. Needs a ``[dynamic]`` section (``docs/dynamic.md``).

    ``enqueue``, ``dequeue`` and ``pick_next`` must be written; the others
    default to doing nothing, except ``select_cpu`` which keeps the task where
    it was (or puts it on the first CPU it may use).

    **sched_ext dispatch queues.** A class that sets ``uses_dsqs = True``
    follows sched_ext's model instead (``docs/python-policies.md``): the
    engine keeps the queues (a global DSQ, one local DSQ per CPU and the
    DSQs the policy creates with ``cx.create_dsq``); ``select_cpu`` may
    insert the task straight into a local DSQ (``cx.dsq_insert(task,
    hetsched.DSQ_LOCAL)``; the task then skips ``enqueue``), ``enqueue``
    inserts it somewhere (default: ``DSQ_GLOBAL``), and a CPU runs its local
    DSQ, then the global DSQ, then calls ``dispatch(cx, cpu, prev)``.
    ``pick_next`` and ``balance`` are not called. Tasks run for slices
    (default 20 ms); at the end of a slice the task stops and is enqueued
    again if another task is waiting for the CPU. A task's virtual time is
    engine state, as ``p->scx.dsq_vtime`` is in the kernel
    (``cx.task_vtime``, ``cx.set_task_vtime``; ``cx.dsq_insert_vtime`` sets
    it). The DSQ model does not cover ``[[vm]]`` sections or ``[dynamic]``
    fusion levels: such a scenario is refused before the run starts.
    """

    name: str = "python"
    #: Use sched_ext's dispatch queues (see above).
    uses_dsqs: bool = False

    def init(self, cx: Context) -> None:
        """Called once before the simulation starts."""

    def select_cpu(self, cx: Context, task: int, prev_cpu: int | None, flags: str) -> int:
        """Choose the CPU a newly runnable ``task`` is assigned to."""
        if prev_cpu is not None:
            return prev_cpu
        return cx.task_affinity(task)[0]

    def enqueue(self, cx: Context, task: int, cpu: int, flags: str) -> None:
        """Put ``task`` (assigned to ``cpu``) on the policy's queues. With
        ``uses_dsqs``, the default inserts it into the global DSQ."""
        if self.uses_dsqs:
            from ._core import DSQ_GLOBAL

            cx.dsq_insert(task, DSQ_GLOBAL)
            return
        raise NotImplementedError(f"{type(self).__name__} must implement enqueue()")

    def dequeue(self, cx: Context, task: int, cpu: int) -> None:
        """Remove a queued ``task`` from the policy's queues without running it.
        (With ``uses_dsqs`` the engine removes it from its DSQ itself.)"""
        if self.uses_dsqs:
            return
        raise NotImplementedError(f"{type(self).__name__} must implement dequeue()")

    def dispatch(self, cx: Context, cpu: int, prev: int | None) -> None:
        """``uses_dsqs`` only: ``cpu``'s local DSQ and the global DSQ are
        empty; move tasks to its local DSQ (``cx.dsq_move_to_local``) or insert
        some there. ``prev`` is the task that ran on ``cpu`` if it is still
        runnable (it runs on if nothing is found)."""

    def pick_next(self, cx: Context, cpu: int) -> int | None:
        """Return (and remove from the queues) the next task for ``cpu``, or None to idle."""
        raise NotImplementedError(f"{type(self).__name__} must implement pick_next()")

    def balance(self, cx: Context, cpu: int) -> None:
        """``cpu`` is about to go idle: a chance to pull work before ``pick_next``."""

    def running(self, cx: Context, task: int, cpu: int) -> None:
        """``task`` starts running on ``cpu``."""

    def stopping(self, cx: Context, task: int, cpu: int, runnable: bool) -> None:
        """``task`` stops running on ``cpu``; ``runnable`` if it was preempted."""

    def tick(self, cx: Context, cpu: int, task: int) -> None:
        """Scheduler tick on busy ``cpu`` running ``task`` (see ``cx.want_tick``)."""

    def on_timer(self, cx: Context, token: int) -> None:
        """A timer armed with ``cx.arm_timer(at_ns, token)`` fired."""

    def reweight(self, cx: Context, task: int) -> None:
        """The nice value, and so the weight, of ``task`` changed."""

    def on_reconfigured(self, cx: Context, info: dict[str, Any]) -> None:
        """A reconfiguration completed: its CPUs are now in or out of service,
        fused or split (see ``cx.reconfigure``)."""

    def on_fault(self, cx: Context, task: int, cpu: int, feature: str) -> bool:
        """``task`` needs ISA ``feature`` that ``cpu`` lacks. Return True after
        moving it (``cx.set_affinity`` to CPUs that have the feature); the
        default, False, gives the Linux outcome: the task is killed (SIGILL)."""
        return False


class Agent:
    """A user-level policy that wakes up every ``period_ms`` of simulated time.

    An agent sees what a daemon sees on Linux (``cx.processes()``,
    ``cx.load_avg()``, ``cx.now_ns``, ``cx.ncpus``) and acts only the way a
    daemon can: ``cx.set_affinity``, ``cx.set_nice`` and ``cx.set_frequency``
    (with the userspace governor). Keep agents free of simulator internals, so
    the same code can later drive real processes.
    """

    name: str = "python-agent"
    period_ms: float = 100.0

    def init(self, cx: Context) -> None:
        """Called once before the first sample."""

    def sample(self, cx: Context) -> None:
        """Called every ``period_ms``: observe and act."""
        raise NotImplementedError(f"{type(self).__name__} must implement sample()")
