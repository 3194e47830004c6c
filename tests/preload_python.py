"""preload_python.py - an ordinary CPython program (nothing of nemo in it)
that ctest runs with the system python3, plain (glibc: the reference) and
under LD_PRELOAD=libnemo-preload.so with the default policy and others.

CPython's GIL is a mutex and two condition variables: a thread that wants
the GIL waits on the first with pthread_cond_timedwait in 5 ms intervals
(sys.getswitchinterval()) and then asks the holder to drop it; the holder
drops it, signals, and waits on the second until another thread took it
(a forced switch).  threading.Lock is a semaphore, and everything else in
threading, queue and concurrent.futures is built on Locks and the GIL.  So
under the interposer every Python thread switch goes through nemo_cond.

Each case checks its results exactly, never a time:
  - two threads handing off through threading.Locks (strict alternation);
  - threading.Condition producers/consumers with a bounded buffer (every
    item consumed exactly once);
  - queue.Queue with more workers than CPUs;
  - threading.Event and threading.Barrier rounds;
  - ThreadPoolExecutor(max_workers=16).map over a few thousand items;
  - timed waits that must time out (Condition.wait, Event.wait,
    Lock.acquire with a timeout) and ones that must not;
  - a thread that computes in pure Python while others wait: they make
    progress only if the GIL is handed over (forced switches);
  - a signal that interrupts a blocked Lock.acquire (Ctrl-C's path: the
    interposed sem_wait must still fail with EINTR).
A lost wake-up shows as a hang: faulthandler dumps every thread's stack
and ends the run (exit 1) after WATCHDOG_S, from its own C thread, which
needs no GIL.

  python3 preload_python.py [expect-interposed | expect-glibc]

expect-interposed: libnemo-preload must be mapped into this process
(/proc/self/maps) and pthread_cond_timedwait must resolve to it;
expect-glibc: it must not be mapped.  Exit 0 only if every check held.
"""
import collections
import concurrent.futures
import ctypes
import faulthandler
import os
import queue
import sys
import threading
import time

WATCHDOG_S = 240          # ctest's limit is 300 s: the stacks come first
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"preload_python: FAILED: {what}", file=sys.stderr, flush=True)


def preload_state():
    """(mapped, resolved): libnemo-preload mapped into this process, and
    the library that defines the pthread_cond_timedwait the process uses."""
    with open("/proc/self/maps") as f:
        mapped = any("libnemo-preload" in line for line in f)
    resolved = "?"
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
        libc = ctypes.CDLL(None)
        sym = ctypes.cast(libc.pthread_cond_timedwait, ctypes.c_void_p)
        info = DlInfo()
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        if libc.dladdr(sym, ctypes.byref(info)) and info.dli_fname:
            resolved = os.path.basename(info.dli_fname.decode())
    except (OSError, AttributeError, ValueError):
        pass
    return mapped, resolved


# ------------------------------------------------------------ lock hand-off

def lock_handoff(rounds=400):
    """Two threads, two Locks used as binary semaphores: A may run only
    after B released it and the other way round; the log must alternate."""
    a, b = threading.Lock(), threading.Lock()
    b.acquire()
    log = []

    def player(mine, other, name):
        for _ in range(rounds):
            mine.acquire()
            log.append(name)
            other.release()

    ta = threading.Thread(target=player, args=(a, b, "A"))
    tb = threading.Thread(target=player, args=(b, a, "B"))
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    check(len(log) == 2 * rounds, f"lock hand-off: {len(log)} turns, wanted {2 * rounds}")
    check(all(x == ("A" if i % 2 == 0 else "B") for i, x in enumerate(log)),
          "lock hand-off: the turns did not alternate")
    return f"lock hand-off {rounds} round trips"


# ----------------------------------------------------- Condition, bounded

def condition_buffer(producers=3, consumers=3, per_producer=1000, capacity=4):
    cv = threading.Condition()
    buf = collections.deque()
    total = producers * per_producer
    taken = []
    state = {"consumed": 0}

    def produce(p):
        for i in range(per_producer):
            item = p * per_producer + i
            with cv:
                while len(buf) >= capacity:
                    cv.wait()
                buf.append(item)
                check(len(buf) <= capacity, "condition: buffer over capacity")
                cv.notify_all()

    def consume():
        mine = []
        while True:
            with cv:
                while not buf and state["consumed"] < total:
                    cv.wait()
                if not buf:           # all consumed
                    cv.notify_all()
                    break
                mine.append(buf.popleft())
                state["consumed"] += 1
                cv.notify_all()
        taken.append(mine)

    ts = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    ts += [threading.Thread(target=consume) for _ in range(consumers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    got = collections.Counter(x for mine in taken for x in mine)
    check(len(taken) == consumers, "condition: a consumer did not finish")
    check(sorted(got) == list(range(total)) and all(n == 1 for n in got.values()),
          f"condition: {sum(got.values())} items taken ({len(got)} distinct), wanted each of {total} once")
    return f"condition {producers}x{per_producer} items to {consumers} consumers"


# ------------------------------------------------------- queue.Queue, many

def queue_workers(items=3000):
    workers = max(8, 3 * (os.cpu_count() or 1))
    tasks, results = queue.Queue(maxsize=16), queue.Queue()

    def work():
        while True:
            x = tasks.get()
            if x is None:
                tasks.task_done()
                return
            results.put((x, x * x + 1))
            tasks.task_done()

    ts = [threading.Thread(target=work) for _ in range(workers)]
    for t in ts:
        t.start()
    for x in range(items):
        tasks.put(x)
    tasks.join()                  # every item done (Queue.join: a Condition)
    for _ in ts:
        tasks.put(None)
    for t in ts:
        t.join()
    out = {}
    while not results.empty():
        x, y = results.get_nowait()
        check(x not in out, f"queue: item {x} done twice")
        out[x] = y
    check(out == {x: x * x + 1 for x in range(items)}, f"queue: {len(out)} results, wanted {items} exact")
    return f"queue {items} items, {workers} workers"


# ------------------------------------------------------ Event and Barrier

def event_rounds(rounds=150):
    go, done = threading.Event(), threading.Event()
    seen = []

    def worker():
        for r in range(rounds):
            check(go.wait(timeout=WATCHDOG_S), "event: go never came")
            go.clear()
            seen.append(r)
            done.set()

    t = threading.Thread(target=worker)
    t.start()
    for r in range(rounds):
        go.set()
        check(done.wait(timeout=WATCHDOG_S), "event: done never came")
        done.clear()
        check(len(seen) == r + 1, f"event: round {r}: the worker did {len(seen)} rounds")
    t.join()
    check(seen == list(range(rounds)), "event: rounds out of order")
    return f"event {rounds} rounds"


def barrier_rounds(parties=4, rounds=80):
    bar = threading.Barrier(parties)
    lock = threading.Lock()
    arrivals = collections.defaultdict(list)   # round -> barrier indexes

    def party(p):
        for r in range(rounds):
            i = bar.wait()
            with lock:
                arrivals[r].append(i)
            # No party may start round r + 1 before all reached round r:
            # the barrier's wait returns to all of them first.

    ts = [threading.Thread(target=party, args=(p,)) for p in range(parties)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(sorted(arrivals) == list(range(rounds)), "barrier: rounds missing")
    check(all(sorted(v) == list(range(parties)) for v in arrivals.values()),
          "barrier: a round did not hand out each index 0..parties-1 once")
    check(not bar.broken, "barrier: broken")
    return f"barrier {parties} parties x {rounds} rounds"


# ---------------------------------------------------- ThreadPoolExecutor

def f_pool(x):
    s = 0
    for k in range(20):
        s = (s * 31 + x + k) % 1000003
    return s


def pool_map(items=2000):
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as ex:
        got = list(ex.map(f_pool, range(items)))
    check(got == [f_pool(x) for x in range(items)], "thread pool: results differ")
    return f"ThreadPoolExecutor(16) map {items}"


# ------------------------------------------------------------ timed waits

def timed_waits():
    """Waits that must time out return False (not early: load only makes a
    timeout later, so the lower bound is no time assertion); waits that are
    answered return True."""
    cv = threading.Condition()
    with cv:
        t0 = time.monotonic()
        r = cv.wait(timeout=0.01)
        el = time.monotonic() - t0
    check(r is False, "Condition.wait(timeout=0.01) with no notify did not return False")
    check(el >= 0.009, f"Condition.wait(timeout=0.01) returned after {el:.4f} s")
    ev = threading.Event()
    t0 = time.monotonic()
    r = ev.wait(0.005)
    el = time.monotonic() - t0
    check(r is False, "Event.wait(0.005) on a clear Event did not return False")
    check(el >= 0.004, f"Event.wait(0.005) returned after {el:.4f} s")
    lk = threading.Lock()
    lk.acquire()
    t0 = time.monotonic()
    r = lk.acquire(timeout=0.01)
    el = time.monotonic() - t0
    check(r is False, "Lock.acquire(timeout=0.01) on a held Lock did not return False")
    check(el >= 0.009, f"Lock.acquire(timeout=0.01) returned after {el:.4f} s")

    # Answered: another thread releases, sets, notifies.
    threading.Timer(0.002, lk.release).start()
    check(lk.acquire(timeout=WATCHDOG_S) is True, "Lock.acquire(timeout) released by another thread")
    lk.release()
    threading.Timer(0.002, ev.set).start()
    check(ev.wait(WATCHDOG_S) is True, "Event.wait(timeout) set by another thread")
    flag = []

    def notifier():
        with cv:
            flag.append(1)
            cv.notify()

    with cv:
        threading.Thread(target=notifier).start()
        check(bool(cv.wait_for(lambda: flag, timeout=WATCHDOG_S)), "Condition.wait_for notified")

    # Many short timed waits racing notifies: every notified item is seen.
    items, seen = [], []
    stop = []

    def waiter():
        while True:
            with cv:
                while not items and not stop:
                    cv.wait(timeout=0.001)
                if items:
                    seen.append(items.pop())
                elif stop:
                    return

    ws = [threading.Thread(target=waiter) for _ in range(3)]
    for w in ws:
        w.start()
    for i in range(300):
        with cv:
            items.append(i)
            cv.notify()
        if i % 7 == 0:
            time.sleep(0.0002)
    with cv:
        stop.append(1)
        cv.notify_all()
    for w in ws:
        w.join()
    check(sorted(seen) == list(range(300)), f"timed waiters: {len(seen)} of 300 items seen")
    return "timed waits"


# ----------------------------------------------------- GIL switching

def gil_switching(wanted=20, limit_s=150.0):
    """One thread computes in pure Python and never blocks; two others need
    the GIL back after each short sleep and after each Lock hand-off.  They
    get it only through forced switches (the GIL's timed wait, then the
    holder's drop and wait on the switch condvar)."""
    progress = [0, 0]
    stop = []
    a, b = threading.Lock(), threading.Lock()
    b.acquire()

    def sleeper():
        while not stop:
            time.sleep(0.0005)
            progress[0] += 1

    # A token between ping and pong: whoever sees stop passes the token on
    # once more and leaves, so the other one leaves too.
    def ping():
        while True:
            a.acquire()
            if stop:
                b.release()
                return
            progress[1] += 1
            b.release()

    def pong():
        while True:
            b.acquire()
            if stop:
                a.release()
                return
            a.release()

    ts = [threading.Thread(target=f) for f in (sleeper, ping, pong)]
    for t in ts:
        t.start()
    result = {}

    def compute():
        s, n = 0, 0
        p0 = list(progress)
        t0 = time.monotonic()
        while min(progress[0] - p0[0], progress[1] - p0[1]) < wanted:
            for k in range(20000):      # no call that releases the GIL
                s = (s + k * k) % 1000000007
            n += 1
            if time.monotonic() - t0 > limit_s:
                break
        result["chunks"], result["sum"] = n, s
        result["progress"] = (progress[0] - p0[0], progress[1] - p0[1])

    c = threading.Thread(target=compute)
    c.start()
    c.join()
    stop.append(1)
    for t in ts:
        t.join()
    one = 0
    for k in range(20000):
        one = (one + k * k) % 1000000007
    want_sum = (one * result["chunks"]) % 1000000007
    check(result["sum"] == want_sum, "GIL switching: the computation's sum is wrong")
    sp, hp = result["progress"]
    check(sp >= wanted and hp >= wanted,
          f"GIL switching: while one thread computed, the others progressed {sp} and {hp} "
          f"times (wanted {wanted} each within {limit_s:.0f} s): the GIL was not handed over")
    return f"GIL switching ({result['chunks']} compute chunks)"


class Interrupted(Exception):
    pass


def interrupted_acquire(rounds=5):
    """A signal interrupts a blocked Lock.acquire in the main thread, as
    Ctrl-C does: CPython runs its handler when sem_wait fails with EINTR,
    which the interposer's polling sem_wait must keep.  Another thread
    signals until the acquire raises (a signal that came before the wait
    began interrupts nothing, on a loaded machine too)."""
    import signal

    def handler(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        for _ in range(rounds):
            lock = threading.Lock()
            lock.acquire()
            stop = threading.Event()
            waiting = threading.Event()

            def killer():
                # Not before the main thread is past t.start(): a signal
                # raised out of start() (seen on a loaded machine, where
                # start() waited longer than the first 20 ms) is not the
                # acquire's.
                waiting.wait()
                while not stop.wait(0.02):
                    os.kill(os.getpid(), signal.SIGUSR1)

            t = threading.Thread(target=killer)
            t.start()
            raised = False
            try:
                waiting.set()
                lock.acquire()      # never released: only a signal ends it
            except Interrupted:
                raised = True
            stop.set()
            t.join()
            check(raised, "a signal did not interrupt a blocked Lock.acquire")
    finally:
        signal.signal(signal.SIGUSR1, old)
    return f"{rounds} interrupted Lock.acquire"


def main():
    args = sys.argv[1:]
    if len(args) > 1 or any(a not in ("expect-interposed", "expect-glibc") for a in args):
        print("usage: python3 preload_python.py [expect-interposed | expect-glibc]", file=sys.stderr)
        return 2
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    mapped, resolved = preload_state()
    if "expect-interposed" in args:
        check(mapped, "libnemo-preload is not mapped into this process (LD_PRELOAD not applied?)")
        check("nemo-preload" in resolved,
              f"pthread_cond_timedwait resolves to {resolved}, not libnemo-preload")
    if "expect-glibc" in args:
        check(not mapped, "libnemo-preload is mapped, but this run is the glibc reference")
    done = []
    for case in (lock_handoff, condition_buffer, queue_workers, event_rounds, barrier_rounds,
                 pool_map, timed_waits, gil_switching, interrupted_acquire):
        done.append(case())
    faulthandler.cancel_dump_traceback_later()
    print(f"preload_python: {'ok' if not failures else f'{len(failures)} FAILED'}: "
          f"python {sys.version.split()[0]}, preload {'mapped' if mapped else 'not mapped'} "
          f"(pthread_cond_timedwait from {resolved}), NEMO_WAIT={os.environ.get('NEMO_WAIT', '(unset)')}; "
          + "; ".join(done))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
