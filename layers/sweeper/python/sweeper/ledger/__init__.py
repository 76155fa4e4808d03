"""The ledger: PostgreSQL, the record of what is done. Migrations and the job store.

Each store module (`claims`, `scheduling`, `outcomes`, `console`, `retention`) runs the named
statements of its own `*_sql` module (`claim_sql`, `schedule_sql`, `settle_sql`, `status_sql` and
`control_sql`, `retention_sql`; the console page's `view_sql`).
"""
