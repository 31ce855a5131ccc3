"""The one registry from Kafka's error codes to the exceptions zkcoord raises (zkcoord.errors)."""

import pytest

from zkcoord.errors import (
    KAFKA_MESSAGES,
    CoordinatorResponseError,
    ErrorCode,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    error_for,
    error_name,
)


def test_a_code_with_an_exception_of_its_own_gets_it_with_kafkas_message():
    error = error_for(69)
    assert type(error) is GroupIdNotFoundError
    assert (str(error), error.error_code) == ("The group id does not exist.", 69)
    assert type(error_for(68, "busy")) is GroupNotEmptyError and str(error_for(68, "busy")) == "busy"
    assert isinstance(error_for(82), FencedInstanceIdError)


def test_any_other_code_is_a_coordinator_response_error_with_kafkas_message():
    error = error_for(27)
    assert type(error) is CoordinatorResponseError
    assert (str(error), error.error_code) == ("The group is rebalancing, so a rejoin is needed.", 27)


@pytest.mark.parametrize("code", [code for code in ErrorCode if code != ErrorCode.NONE], ids=lambda code: code.name)
def test_every_error_zkcoord_answers_has_kafkas_message(code):
    assert KAFKA_MESSAGES[code]
    assert str(error_for(code)) == KAFKA_MESSAGES[code]


def test_a_code_zkcoord_does_not_know_is_named_by_its_number():
    assert error_name(999) == "error 999" and str(error_for(999)) == "error 999"
    assert error_name(27) == "REBALANCE_IN_PROGRESS"
