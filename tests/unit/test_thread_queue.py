"""ThreadQueue: the consumer's hand-over from its worker thread to the poll side."""

import os
import queue
import signal
import threading
import time

import pytest

from zkcoord.zk.session import ThreadQueue


def test_items_come_out_in_order_and_an_empty_queue_raises_empty():
    handed = ThreadQueue()
    for item in ("a", "b", "c"):
        handed.put(item)
    assert [handed.get(), handed.get(), handed.get()] == ["a", "b", "c"]
    with pytest.raises(queue.Empty):
        handed.get()
    with pytest.raises(queue.Empty):
        handed.get(timeout=0.01)


def test_a_put_from_another_thread_wakes_a_waiting_get():
    handed = ThreadQueue()
    putter = threading.Timer(0.05, handed.put, args=("late",))
    putter.start()
    try:
        assert handed.get(timeout=30) == "late"
    finally:
        putter.cancel()


def test_every_item_put_by_several_threads_comes_out_once():
    handed = ThreadQueue()
    per_thread = 2000

    def put_all(name: str) -> None:
        for n in range(per_thread):
            handed.put((name, n))

    putters = [threading.Thread(target=put_all, args=(f"t{i}",)) for i in range(4)]
    for putter in putters:
        putter.start()
    received = [handed.get(timeout=30) for _ in range(4 * per_thread)]
    for putter in putters:
        putter.join()
    assert sorted(received) == sorted((f"t{i}", n) for i in range(4) for n in range(per_thread))
    for i in range(4):  # each putter's items in its order
        assert [n for name, n in received if name == f"t{i}"] == list(range(per_thread))


@pytest.mark.timeout(60)
def test_a_signal_during_a_timed_get_never_makes_it_wait_forever():
    """CPython 3.11's SimpleQueue.get(timeout) hung here within seconds (a member's poll under SIGTERM did too)."""
    handed = ThreadQueue()
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    stop = threading.Event()

    def pester() -> None:
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.0003)

    pesterer = threading.Thread(target=pester, daemon=True)
    pesterer.start()
    timed_out = 0
    try:
        started = time.monotonic()
        while time.monotonic() - started < 3:
            with pytest.raises(queue.Empty):
                handed.get(timeout=0.001)
            timed_out += 1
    finally:
        stop.set()
        pesterer.join()
        signal.signal(signal.SIGUSR1, previous)
    assert timed_out > 100
