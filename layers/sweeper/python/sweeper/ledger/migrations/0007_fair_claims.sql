-- Fair claims: a claim reads each tenant's earliest due rows, so one tenant's backlog cannot
-- hide another tenant's due work. Walked as a loose index scan (one probe per tenant holding
-- pending rows), then read per tenant in due order; partial, like sweeper_jobs_pending_due, so a
-- settled or leased row is in neither.
CREATE INDEX sweeper_jobs_pending_tenant_due
    ON sweeper_jobs (policy, tenant_id, next_attempt_at, id)
    WHERE status = 'pending';
