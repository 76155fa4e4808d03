-- Operator retries get a fresh call. An operator retry (or a redrive of a terminal job) moves a
-- failed job back to pending and starts a new retry round. The consumer keys its Powertools
-- idempotency record on the operation key plus the round (round 0: the operation key alone, as
-- before), so a settled outcome stored in an earlier round, such as a 422, is never replayed in
-- place of the fresh call the operator asked for. The vendor's Idempotency-Key stays the operation
-- key in every round: a first call that was in fact accepted is replayed by the vendor, one effect.
ALTER TABLE sweeper_jobs
    ADD COLUMN retry_round integer NOT NULL DEFAULT 0 CHECK (retry_round >= 0);
