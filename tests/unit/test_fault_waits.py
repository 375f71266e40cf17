"""The lab's wait for a coordinator's timeout abort, without a broker: a coordinator on the move is asked again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
import pytest

from txnwatch.core.vocabulary import TxnState
from txnwatch.lab import faults
from txnwatch.lab.errors import LabError


class Admin:
    """Answers DescribeTransactions from a script: an exception is raised, anything else returned."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.closed = answers, False

    def describe_transactions(self, ids: list[str]) -> dict[str, Any]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return {ids[0]: answer}

    def close(self) -> None:
        self.closed = True


def described(state: str, epoch: int) -> SimpleNamespace:
    return SimpleNamespace(producer_epoch=epoch, state=SimpleNamespace(value=state))


def waiting(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> tuple[faults.CoordinatorTimeoutAbort, Admin]:
    admin = Admin(answers)
    monkeypatch.setattr(faults, "admin_client", lambda bootstrap: admin)
    monkeypatch.setattr(faults.time, "sleep", lambda seconds: None)
    fault = faults.CoordinatorTimeoutAbort(bootstrap="127.0.0.1:1", producer=None,
                                           transactional_id="t", topic="x", partition=0, producer_id=7,
                                           epoch_before=3)
    return fault, admin


@pytest.mark.parametrize("moving", [Errors.NotCoordinatorError, Errors.CoordinatorLoadInProgressError,
                                    Errors.CoordinatorNotAvailableError])
def test_a_moving_coordinator_is_asked_again(monkeypatch: pytest.MonkeyPatch, moving: type[Exception]) -> None:
    fault, admin = waiting(monkeypatch, [moving("t"), described(TxnState.ONGOING, 3), moving("t"),
                                         described(TxnState.COMPLETE_ABORT, 4)])
    fault.wait_for_abort(timeout=30)
    assert (fault.epoch_after, fault.final_state, admin.closed) == (4, TxnState.COMPLETE_ABORT, True)


def test_another_error_is_not_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    fault, admin = waiting(monkeypatch, [Errors.TransactionalIdAuthorizationFailedError("t")])
    with pytest.raises(Errors.TransactionalIdAuthorizationFailedError):
        fault.wait_for_abort(timeout=30)
    assert admin.closed


def test_no_abort_by_the_deadline_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fault, _ = waiting(monkeypatch, [Errors.NotCoordinatorError("t")])
    with pytest.raises(LabError, match=r"did not time out t within 0\.01s"):
        fault.wait_for_abort(timeout=0.01)
