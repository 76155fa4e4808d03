"""Systems of record for the local stack, the demo and the benchmark: a second database in the
local PostgreSQL cluster with an `exports` table, and a bucket in the AWS emulator.

What discovery reads locally is real: its own database (never the ledger's), read by the same
wrapped, keyset-paged query as on AWS; a bucket listed by the same ListObjectsV2 calls.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg import sql

#: The system-of-record database's name in the local cluster.
SOURCE_DATABASE: Final = "sweeper_source"
#: The table an application would own: exports and when their retention ends.
SOURCE_TABLE: Final = """
CREATE TABLE IF NOT EXISTS exports (
    tenant      text        NOT NULL,
    export_id   text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, export_id)
);
-- The keyset order discovery pages by: each page is a range scan of this index.
CREATE INDEX IF NOT EXISTS exports_discovery ON exports (expires_at, tenant, export_id);
"""
#: The discovery query over it (the policy's `discovery.query`).
SOURCE_QUERY: Final = (
    "SELECT tenant AS tenant_id, export_id AS object_id, expires_at AS due_at FROM exports "
    "WHERE expires_at <= %(now)s"
)
# Rows `first`..`last`, spread over `tenants`, every one past its retention (`due`), with many
# equal due times (one per 100 rows) so pages split among equal sort keys.
SEED_SOURCE: Final = """
INSERT INTO exports (tenant, export_id, expires_at)
SELECT 'tenant-' || (n %% %(tenants)s), 'export-' || lpad(n::text, 9, '0'),
       %(due)s - make_interval(secs => n / 100)
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n
ON CONFLICT DO NOTHING
"""
#: Where the local bucket's objects live, and how a key names its tenant and object.
BUCKET_PREFIX: Final = "exports/"
KEY_TEMPLATE: Final = "exports/{tenant_id}/{object_id}"


def source_database(admin_url: str, name: str = SOURCE_DATABASE, *, fresh: bool = True) -> str:
    """Create (or recreate) the system-of-record database on the ledger's server; its URL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if fresh:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SOURCE_TABLE.encode())
    return url


def seed_source(url: str, rows: int, tenants: int, due: datetime, first: int = 0) -> None:
    """`rows` exports past their retention, numbered from `first`."""
    if rows <= 0:
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            SEED_SOURCE,
            {"tenants": tenants, "due": due, "first": first, "last": first + rows - 1},
        )
        conn.execute("ANALYZE exports")


def seed_bucket(
    s3: Any, bucket: str, objects: int, tenants: int, *, first: int = 0, workers: int = 8
) -> None:
    """Create the bucket (if needed) and put `objects` small objects under the prefix."""
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)

    def put(n: int) -> None:
        key = KEY_TEMPLATE.format(tenant_id=f"tenant-{n % tenants}", object_id=f"upload-{n:09d}")
        s3.put_object(Bucket=bucket, Key=key, Body=b"")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(put, range(first, first + objects)))
