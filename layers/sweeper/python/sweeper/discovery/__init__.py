"""Discovery: the periodic reconciliation pass that finds obligations in a system of record.

A source (`sql`, `s3`) is read page by page in a total order from a cursor persisted in the
ledger; every row is checked (bad rows are counted by position, never echoed), and the page's
obligations go in through the ledger's one idempotent upsert together with the cursor's advance.
Running a pass twice changes nothing; a run stopped by its budget resumes where it committed.
"""
