"""Grade many jobs at once: validate, dedupe, consult the cache, fan out over all cores, keep order.

Jobs that share their tests and settings go to one worker together as a batch (``batch/rounds.py``);
whatever a batch cannot vouch for comes back and is graded alone, on any worker."""

from __future__ import annotations

import logging
import os
import queue
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from .backends import BACKENDS, FAST
from .batch.rounds import BatchOutcome, grade_batch
from .batch.sharing import MAX_BATCH, alone_reason, settings_key
from .cache import ResultCache, job_key
from .compile.crates import CratesUnavailable, job_crates, passable_by_others
from .compile.crates import ensure as ensure_crates
from .compile.crateset import DEBIAN_PACKAGES
from .compile.prelude import crate_refusal
from .compile.soundness import unsound_reason
from .compile.toolchain import find_toolchain
from .compile.trait_scope import scope_refusal
from .isolation.cgroups import SlotMemory, cgroup_problem
from .isolation.levels import BWRAP, choose_level
from .isolation.limits import Limits
from .isolation.process import cancel_all, resume_all
from .isolation.slots import UidLease
from .jobs import InvalidJob, Job
from .results import Result, invalid_result
from .single import Slot, grade_job
from .status import Status

log = logging.getLogger("reward_sandbox")


def default_workers() -> int:
    """Worker count when none is given: this process's cores, divided among the ranks of a
    multi-process launch on this node (``LOCAL_WORLD_SIZE``, set by torchrun, ``accelerate launch``
    and deepspeed), so N training ranks grading at once do not run N x all-cores sandboxes."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        ranks = 1
    return max(1, cores // ranks)


class Grader:
    """A reusable grading service. Threads suffice: each job's work happens in child processes.

    >>> grader = Grader(workers=2)                                  # doctest: +SKIP
    >>> [r.status for r in grader.grade([{"id": "a", "source": "pub fn f() {}"}])]  # doctest: +SKIP
    [<Status.OK: 'ok'>]
    """

    def __init__(
        self,
        workers: int | None = None,
        isolation: str = "auto",
        backend: str = FAST,
        limits: Limits | None = None,
        cache: ResultCache | None = None,
        batch: bool = True,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.toolchain = find_toolchain()
        self.isolation, warning = choose_level(isolation)
        self.level = self.isolation.name
        self.backend = backend
        self.limits = limits or Limits()
        self.workers = max(1, workers or default_workers())
        self.cache = cache if cache is not None else ResultCache()
        # jobs sharing tests and settings share one compiler run (fast backend, bubblewrap only)
        self.batch = batch and backend == FAST and self.level == BWRAP
        self.memory_scope = "job"
        no_cgroups = cgroup_problem()
        if no_cgroups:
            self.memory_scope = "process"
            note = f"memory is limited per process only: {no_cgroups}"
            warning = f"{warning}; {note}" if warning else note
        if warning:
            log.warning(warning)
        self.warning = warning
        self._lease = UidLease(self.workers) if os.geteuid() == 0 else None
        uids: list[int | None] = list(self._lease.uids) if self._lease else [None] * self.workers
        self._slots: queue.Queue[Slot] = queue.Queue()
        self._all_slots = [
            Slot(uid, SlotMemory(f"uid-{uid}") if uid is not None and not no_cgroups else None) for uid in uids
        ]
        for slot in self._all_slots:
            self._slots.put(slot)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="reward-sandbox")

    @property
    def uids(self) -> list[int]:
        """The unprivileged uids this grader's slots run untrusted code as (empty when not root)."""
        return [slot.uid for slot in self._all_slots if slot.uid is not None]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        for slot in self._all_slots:
            if slot.memory is not None:
                slot.memory.remove()
        if self._lease is not None:
            self._lease.release()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _crate_key(self, job: Job) -> str:
        """The crate set's key for a job that links crates ('' for a std-only one), building the set
        first if no process has."""
        names = job_crates(job)
        if not names:
            return ""
        built = ensure_crates(self.toolchain.version, self.toolchain.cargo)
        if self.level != BWRAP:  # no bind, no /.cargo/config.toml: the set is read where it lies
            if self.backend != FAST:
                raise CratesUnavailable("the cargo backend takes crates under bubblewrap only")
            if os.geteuid() == 0 and not passable_by_others(built.lib):
                raise CratesUnavailable(
                    f"{built.lib} is out of the slot uids' reach under rlimits isolation: "
                    "set REWARD_SANDBOX_CRATES to a directory others can read (e.g. /var/cache/reward-sandbox)"
                )
        missing = [name for name in names if name not in built.rlibs]
        if missing:
            raise CratesUnavailable(
                f"{', '.join(missing)} not installed here (Debian: apt-get install {' '.join(DEBIAN_PACKAGES)})"
            )
        return built.key

    def _grade_one(self, job: Job, check_first: bool = False) -> Result:
        slot = self._slots.get()
        try:
            return grade_job(
                job,
                toolchain=self.toolchain,
                isolation=self.isolation,
                limits=self.limits,
                backend=self.backend,
                slot=slot,
                check_first=check_first,
            )
        finally:
            self._slots.put(slot)

    def _grade_batch(self, jobs: list[Job]) -> BatchOutcome:
        slot = self._slots.get()
        try:
            return grade_batch(jobs, toolchain=self.toolchain, isolation=self.isolation, limits=self.limits, slot=slot)
        finally:
            self._slots.put(slot)

    def _units(self, jobs: dict[str, Job]) -> list[list[str]]:
        """Keys to grade together (batches of 2 or more), then keys to grade alone."""
        if not self.batch:
            return [[key] for key in jobs]
        # Every program of a batch carries its own hidden-test module, so a batch need not share tests:
        # programs of the same settings (a step's GRPO groups, distinct problems) share builds, in as
        # few chunks as MAX_BATCH allows, but a multiple of the workers when there are enough programs
        # for every worker, so none waits idle behind another's batch.
        groups: dict[tuple[object, ...], list[str]] = {}
        alone: list[list[str]] = []
        for key, job in jobs.items():
            if alone_reason(job) is None:
                groups.setdefault(settings_key(job), []).append(key)
            else:
                alone.append([key])
        batches: list[list[str]] = []
        for keys in groups.values():
            count = -(-len(keys) // MAX_BATCH)  # even chunks of at most MAX_BATCH
            if len(keys) >= 2 * self.workers:
                count = -(-count // self.workers) * self.workers
            chunks = [keys[i::count] for i in range(count)]
            batches += [c for c in chunks if len(c) > 1]
            alone += [c for c in chunks if len(c) == 1]
        return batches + alone

    def grade(
        self, items: Sequence[Job | dict[str, Any] | InvalidJob], on_result: Callable[[int, Result], None] | None = None
    ) -> list[Result]:
        """Grade ``items`` (jobs, raw JSON records, or :class:`InvalidJob` for records that failed
        to parse); results come back in input order. A bad record becomes an ``invalid_input``
        result and never stops the others."""
        results: list[Result | None] = [None] * len(items)
        ids: dict[int, str] = {}
        pending: dict[str, list[int]] = {}
        jobs: dict[str, Job] = {}
        for index, item in enumerate(items):
            try:
                if isinstance(item, InvalidJob):
                    raise item
                job = item if isinstance(item, Job) else Job.from_dict(item, index)
                if not job.allow_unsafe and (unsound := unsound_reason(job.source)) is not None:
                    raise InvalidJob(f"job {job.id!r}: {unsound}", job_id=job.id)
                if job.tests.strip() and (unscoped := scope_refusal(job.source)) is not None:
                    raise InvalidJob(f"job {job.id!r}: {unscoped}", job_id=job.id)
                if job.tests.strip() and (posing := crate_refusal(job.source, job.tests, job.edition)) is not None:
                    raise InvalidJob(f"job {job.id!r}: {posing}", job_id=job.id)
                crate_key = self._crate_key(job)
            except InvalidJob as exc:
                results[index] = invalid_result(exc.job_id or f"#{index}", str(exc))
                if on_result:
                    on_result(index, results[index])  # type: ignore[arg-type]
                continue
            except CratesUnavailable as exc:  # ours, not the program's: never cached
                results[index] = Result(id=job.id, status=Status.SANDBOX_ERROR, reason=f"crates: {exc}")
                if on_result:
                    on_result(index, results[index])  # type: ignore[arg-type]
                continue
            ids[index] = job.id
            key = job_key(
                job,
                self.toolchain.version,
                self.backend,
                self.limits,
                self.level,
                self.memory_scope,
                self.batch,
                crates=crate_key,
            )
            cached = self.cache.get(key)
            if cached is not None:
                results[index] = replace(cached, id=job.id, cached=True)
                if on_result:
                    on_result(index, results[index])  # type: ignore[arg-type]
                continue
            pending.setdefault(key, []).append(index)
            jobs.setdefault(key, job)
        futures: dict[Future[Any], list[str]] = {}

        def submit(keys: list[str], broken: bool = False) -> None:
            if len(keys) == 1:
                futures[self._executor.submit(self._grade_one, jobs[keys[0]], broken)] = keys
            else:
                futures[self._executor.submit(self._grade_batch, [jobs[k] for k in keys])] = keys

        def deliver(key: str, result: Result) -> None:
            self.cache.put(key, result)
            for n, index in enumerate(pending[key]):
                results[index] = replace(result, id=ids[index], cached=n > 0)
                if on_result:
                    on_result(index, results[index])  # type: ignore[arg-type]

        for unit in self._units(jobs):
            submit(unit)
        try:
            self._collect(futures, submit, deliver)
        except BaseException:  # Ctrl-C (or any error): stop every sandbox now, not after the queue drains
            for future in futures:
                future.cancel()
            cancel_all()
            try:
                wait(futures)  # the running ones end within a second: their sandboxes are gone
            finally:
                resume_all()
            raise
        return [r for r in results if r is not None]

    @staticmethod
    def _collect(
        futures: dict[Future[Any], list[str]],
        submit: Callable[..., None],
        deliver: Callable[[str, Result], None],
    ) -> None:
        """Deliver results as units finish, submitting again the members a batch sends alone."""
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in done:
                keys = futures.pop(future)
                got = future.result()
                if isinstance(got, Result):
                    deliver(keys[0], got)
                    continue
                for k, result in got.results.items():
                    deliver(keys[k], result)
                for k in got.alone:
                    submit([keys[k]], k in got.broken)


def grade(items: Iterable[Job | dict[str, Any]], **kwargs: Any) -> list[Result]:
    """One-shot convenience wrapper around :class:`Grader`."""
    with Grader(**kwargs) as grader:
        return grader.grade(list(items))
