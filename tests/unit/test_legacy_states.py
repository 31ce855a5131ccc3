"""The legacy member's lifecycle table and the events that move it (zkcoord.legacy.states). Pure."""

import copy

import pytest

from zkcoord.legacy import states
from zkcoord.legacy.states import (
    CONNECTED,
    LOST,
    SUSPENDED,
    VALID_PREVIOUS_STATES,
    AfterConnect,
    IllegalMemberTransition,
    Lifecycle,
    MemberState,
    check_transition,
)

S = MemberState
ALLOWED = {
    (previous, target) for target, previous_states in VALID_PREVIOUS_STATES.items() for previous in previous_states
}


def started() -> Lifecycle:
    lifecycle = Lifecycle()
    lifecycle.start()
    assert lifecycle.connection_changed(CONNECTED) is None
    return lifecycle


def test_the_table_names_every_state():
    assert set(VALID_PREVIOUS_STATES) == set(MemberState)
    assert all(previous <= set(MemberState) for previous in VALID_PREVIOUS_STATES.values())


def test_an_illegal_transition_raises():
    with pytest.raises(IllegalMemberTransition, match="REGISTERED -> REGISTERING"):
        check_transition(S.REGISTERED, S.REGISTERING)
    lifecycle = started()
    with pytest.raises(IllegalMemberTransition):
        lifecycle.start()
    with pytest.raises(IllegalMemberTransition):
        lifecycle.closed()  # only after close()
    assert lifecycle.state is S.STARTING


def test_expiry_re_registration_and_close():
    lifecycle = started()
    lifecycle.registration_written()
    assert lifecycle.registered and not lifecycle.superseded
    assert lifecycle.connection_changed(SUSPENDED) is None
    assert lifecycle.connection_changed(CONNECTED) is AfterConnect.RECONNECTED  # the same session
    assert lifecycle.connection_changed(SUSPENDED) is None
    assert lifecycle.connection_changed(LOST) is None
    assert lifecycle.state is S.SESSION_LOST and not lifecycle.superseded  # a retrying rebalance goes on
    assert lifecycle.connection_changed(CONNECTED) is AfterConnect.NEW_SESSION
    assert lifecycle.superseded  # now it gives way to handleNewSession
    lifecycle.reregistration_began()
    assert lifecycle.state is S.REGISTERING
    lifecycle.registration_written()
    assert lifecycle.registered
    lifecycle.close()
    assert lifecycle.closing and not lifecycle.registered
    assert lifecycle.connection_changed(LOST) is None  # closing the session
    lifecycle.closed()
    assert lifecycle.state is S.CLOSED


def test_a_session_lost_again_before_its_re_registration_still_owes_one():
    lifecycle = started()
    lifecycle.registration_written()
    lifecycle.connection_changed(LOST)
    lifecycle.connection_changed(CONNECTED)
    lifecycle.connection_changed(LOST)
    assert lifecycle.superseded  # the older rebalance still gives way
    lifecycle.reregistration_began()  # begins while disconnected
    assert lifecycle.state is S.SESSION_LOST
    assert lifecycle.connection_changed(CONNECTED) is AfterConnect.NEW_SESSION


def test_a_registration_that_lands_after_a_newer_session_leaves_that_one_owed():
    lifecycle = started()  # registering for the first time when the session expires
    lifecycle.connection_changed(LOST)
    lifecycle.connection_changed(CONNECTED)
    lifecycle.registration_written()  # startup's create, answered in the new session
    assert lifecycle.superseded and not lifecycle.registered
    lifecycle.reregistration_began()
    lifecycle.registration_written()
    assert lifecycle.registered


def _explore(lifecycle: Lifecycle, handlers: int, closes: int, depth: int, seen: list) -> None:
    """Every event the member's hub can meet next, as kazoo and the member's code order them."""
    if depth == 0:
        return
    connection = lifecycle.connection
    options = []
    for state in (CONNECTED, SUSPENDED, LOST):
        if state != connection and (connection != LOST or state == CONNECTED):  # LOST is followed by CONNECTED
            options.append(("connection", state))
    if connection == CONNECTED:  # ZooKeeper answers (a create of the ids node) only while connected
        options.append(("registration_written", None))
    if handlers:
        options.append(("reregistration_began", None))
    if closes < 2:
        options.append(("close" if closes == 0 else "closed", None))
    for event, state in options:
        after = copy.copy(lifecycle)
        reaction = after.connection_changed(state) if event == "connection" else getattr(after, event)()
        seen.append(event)
        _explore(
            after,
            handlers + (reaction is AfterConnect.NEW_SESSION) - (event == "reregistration_began"),
            closes + (event in ("close", "closed")),
            depth - 1,
            seen,
        )


def test_every_event_sequence_stays_in_the_table_and_uses_all_of_it(monkeypatch):
    made = set()

    def recording(current, target):
        check_transition(current, target)  # raises on anything the table does not allow
        made.add((current, target))

    monkeypatch.setattr(states, "check_transition", recording)
    lifecycle = Lifecycle()
    lifecycle.start()
    lifecycle.connection_changed(CONNECTED)  # zk.start()
    events: list = []
    _explore(lifecycle, handlers=0, closes=0, depth=7, seen=events)
    assert len(events) > 1000
    assert made | {(S.NEW, S.STARTING)} == ALLOWED  # no transition the member never makes
