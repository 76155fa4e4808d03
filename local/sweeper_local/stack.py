"""The whole local stack in one place: ledger database, AWS emulator, vendor simulator."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Self

from sweeper.config import Quota
from sweeper.ledger.migrate import migrate
from sweeper_local.aws import LocalAws
from sweeper_local.postgres import LocalPostgres
from sweeper_local.service import Service
from sweeper_local.vendor import QuotaScope, VendorSimulator


@dataclass
class LocalStack(Service):
    """Start what is not given: PostgreSQL unless `database_url`, the simulator unless `api_url`."""

    database_url: str | None = None
    api_url: str | None = None
    vendor_quota: Quota | None = None
    #: What the simulator's quota counts over: all calls, or each tenant's.
    vendor_quota_scope: QuotaScope = "global"
    vendor_latency_seconds: float = 0.002
    vendor_latency_jitter_seconds: float = 0.003
    aws: LocalAws = field(default_factory=LocalAws)
    vendor: VendorSimulator | None = None
    #: The system of record's database in the same cluster (made on first use by a door).
    source_database_url: str | None = None
    #: The bucket the s3 door lists.
    source_bucket: str = "sweeper-local-exports"
    #: Where hints come in once an intake runs (sweeper_local.intake): the webhook on loopback,
    #: the secret that signs its requests, and each policy's intake queue.
    webhook_url: str | None = None
    webhook_secret: str | None = None
    intake_queue_urls: dict[str, str] = field(default_factory=dict)
    _exit: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def start(self) -> Self:
        try:
            if self.database_url is None:
                pg = self._exit.enter_context(LocalPostgres())
                self.database_url = pg.url
            migrate(self.database_url)
            self._exit.enter_context(self.aws)
            if self.api_url is None:
                quota = None
                if self.vendor_quota is not None:
                    quota = (self.vendor_quota.limit, self.vendor_quota.period_seconds)
                self.vendor = self._exit.enter_context(
                    VendorSimulator(
                        quota=quota,
                        quota_scope=self.vendor_quota_scope,
                        latency_seconds=self.vendor_latency_seconds,
                        latency_jitter_seconds=self.vendor_latency_jitter_seconds,
                    )
                )
                self.api_url = self.vendor.url
        except BaseException:
            self._exit.close()
            raise
        return self

    def stop(self) -> None:
        self._exit.close()
