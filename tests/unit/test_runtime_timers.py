"""The runtime's keyed timers (group-coordinator.md Appendix A): deadline order, strictness, replacement, cancel.

``zkcoord.runtime.timers`` is driven directly; expected values are written out, never read back from the module.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.runtime.timers import Timers


def fire_all(timers: Timers, now_ms: int) -> list:
    """Pop every due key, as the coordinator's runtime does; returns them in the order they came."""
    fired = []
    while (key := timers.pop_due(now_ms)) is not None:
        fired.append(key)
    return fired


def test_timers_fire_in_deadline_order_with_ties_in_scheduling_order():
    timers = Timers()
    timers.schedule("late", 30)
    timers.schedule("tie-1", 20)
    timers.schedule("early", 10)
    timers.schedule("tie-2", 20)
    timers.schedule("tie-0", 20)
    assert timers.next_deadline() == 10
    assert fire_all(timers, 100) == ["early", "tie-1", "tie-2", "tie-0", "late"]
    assert len(timers) == 0 and timers.next_deadline() is None


def test_timers_fire_strictly_after_the_deadline():
    """Kafka's MockTimer fires when ``deadline < now``: a timer due at 10 does not fire at 10."""
    timers = Timers()
    timers.schedule("k", 10)
    assert fire_all(timers, 9) == []
    assert fire_all(timers, 10) == []
    assert timers.deadline("k") == 10
    assert fire_all(timers, 11) == ["k"]
    assert timers.deadline("k") is None


def test_timers_reschedule_replaces_and_the_stale_deadline_never_fires():
    timers = Timers()
    timers.schedule("k", 10)
    timers.schedule("k", 50)
    assert len(timers) == 1 and timers.deadline("k") == 50
    assert timers.next_deadline() == 50
    assert fire_all(timers, 20) == []
    assert fire_all(timers, 51) == ["k"]
    assert fire_all(timers, 1000) == []
    # Rescheduling earlier also replaces: it fires once, at the earlier deadline.
    timers.schedule("k", 50)
    timers.schedule("k", 5)
    assert timers.next_deadline() == 5
    assert fire_all(timers, 6) == ["k"]
    assert fire_all(timers, 100) == []


def test_timers_reschedule_with_the_same_deadline_moves_to_the_back_of_the_tie():
    timers = Timers()
    timers.schedule("a", 10)
    timers.schedule("b", 10)
    timers.schedule("a", 10)
    assert fire_all(timers, 11) == ["b", "a"]


def test_timers_cancel():
    timers = Timers()
    timers.schedule("a", 10)
    timers.schedule("b", 20)
    timers.cancel("a")
    timers.cancel("missing")  # a no-op
    assert len(timers) == 1 and timers.deadline("a") is None
    assert timers.next_deadline() == 20
    assert fire_all(timers, 100) == ["b"]


def test_a_timer_scheduled_already_due_while_firing_fires_in_the_same_pass():
    """The runtime pops until nothing is due: what a fired timer schedules in the past fires in the same pass."""
    timers = Timers()
    timers.schedule("first", 1)
    fired = []
    while (key := timers.pop_due(7)) is not None:
        fired.append(key)
        if key == "first":
            timers.schedule("second", 6)
    assert fired == ["first", "second"]


KEYS = ("a", "b", "c", ("session", "g", "m"), ("join", "g"))
TIMER_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.sampled_from(KEYS), st.integers(0, 40)),
        st.tuples(st.just("cancel"), st.sampled_from(KEYS)),
        st.tuples(st.just("fire"), st.integers(0, 45)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(TIMER_OPS)
def test_timers_fire_exactly_the_live_keys_past_their_deadline_in_order(ops):
    """Any schedule/cancel/fire sequence: a fire at ``now`` pops exactly the live keys with ``deadline < now``,
    ordered by (deadline, order of their latest scheduling); superseded and cancelled schedules never come."""
    timers = Timers()
    live: dict = {}  # key → (deadline, scheduling number)
    number = 0
    for op in ops:
        if op[0] == "schedule":
            _, key, deadline = op
            live[key] = (deadline, number)
            number += 1
            timers.schedule(key, deadline)
        elif op[0] == "cancel":
            live.pop(op[1], None)
            timers.cancel(op[1])
        else:
            now = op[1]
            due = sorted((entry, key) for key, entry in live.items() if entry[0] < now)
            assert fire_all(timers, now) == [key for _, key in due]
            for _, key in due:
                del live[key]
        assert len(timers) == len(live)
        assert timers.next_deadline() == min((deadline for deadline, _ in live.values()), default=None)
        for key in KEYS:
            assert timers.deadline(key) == (live[key][0] if key in live else None)


def test_rescheduling_one_key_many_times_keeps_the_heap_small_and_fires_once():
    """A heartbeat reschedules its session timer each time; stale entries must not pile up for a session."""
    timers = Timers()
    for beat in range(10_000):
        timers.schedule(("session", "g", "m"), 45_000 + beat)
    timers.schedule(("session", "g", "other"), 50)
    assert timers.heap_size <= 2 * len(timers) + 1024
    assert fire_all(timers, 10**9) == [("session", "g", "other"), ("session", "g", "m")]
    assert len(timers) == 0
