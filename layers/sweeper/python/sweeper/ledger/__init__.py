"""The ledger: PostgreSQL, the record of what is done. Migrations and the job store."""
