"""Flink's lingering transactions: open transactions of a KafkaSink that Flink will never finish (detect/lingering.py)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from txnwatch.serve.api.deps import ClusterFilter, ReadSession, RuntimeDep
from txnwatch.serve.api.incidents import IncidentBuilder
from txnwatch.serve.api.params import json_response, now
from txnwatch.serve.api.schemas import ErrorOut, LingeringReport

router = APIRouter(prefix="/lingering", tags=["lingering Flink transactions"])


@router.get("", response_model=LingeringReport, summary="Lingering Flink sink transactions, as of the latest poll",
            description="Ongoing transactions of a Flink KafkaSink (ids `<prefix>-<subtask>-<checkpoint>`) that "
                        "Flink will never finish: `superseded` (a transaction of the same prefix and subtask that "
                        "started later has committed: Flink commits a subtask's checkpoints in order) or "
                        "`job_gone` (past its transaction.timeout.ms, nothing of the prefix started within a "
                        "timeout). Each pins the LSO of its partitions, so read_committed consumers wait until the "
                        "coordinator aborts it at its timeout (Flink sets an hour): `abort_by_id_command` ends it "
                        "now. Oldest first.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_lingering(session: ReadSession, runtime: RuntimeDep, clusters: ClusterFilter) -> Response:
    incidents = IncidentBuilder(session, runtime.settings, now(), runtime.state)
    return json_response(LingeringReport, {"items": incidents.lingering_all(clusters.names)})
