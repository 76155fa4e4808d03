"""`Observability`, the construct the stack composes: the alarm board and one watch per part."""

from __future__ import annotations

from infra.database import Database
from infra.discovery import Discovery
from infra.intake import Intake
from infra.observability.base import AlarmBoard, PolicyHome
from infra.observability.discovery_alarms import watch_discovery
from infra.observability.intake_alarms import watch_intake
from infra.observability.ledger_alarms import watch_database
from infra.observability.pipeline_alarms import PipelineWatch
from infra.observability.retention_alarms import watch_retention
from infra.pipeline import Pipeline
from infra.redrive import Redrive
from infra.retention import Retention


class Observability(AlarmBoard):
    """The alarm topic, the alarms of every part of the stack, and each policy's dashboard."""

    def watch(self, pipeline: Pipeline, redrive: Redrive, *, home: PolicyHome) -> None:
        """Alarms (under `home`, in the policy's stack) and a dashboard row for one policy's
        pipeline and its redrive, after the ledger's."""
        self.draw_shared_rows(home)
        PipelineWatch(pipeline, redrive).apply(self, home)

    def watch_retention(self, retention: Retention, *, home: PolicyHome) -> None:
        """Alarms (under `home`) and a dashboard row for one policy's scheduled prune."""
        watch_retention(self, retention, home)

    def watch_database(self, database: Database) -> None:
        """Alarms for the ledger a new cluster holds and its secrets, and the dashboard row each
        policy's dashboard draws of them (call it before `watch`)."""
        watch_database(self, database)

    def watch_discovery(self, discovery: Discovery, *, home: PolicyHome) -> None:
        """Alarms (under `home`) and a dashboard row for one policy's discovery."""
        watch_discovery(self, discovery, home)

    def watch_intake(self, intake: Intake, *, home: PolicyHome) -> None:
        """Alarms (under `home`) and dashboard rows for one policy's intake."""
        watch_intake(self, intake, home)
