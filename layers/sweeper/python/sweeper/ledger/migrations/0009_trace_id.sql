-- The X-Ray trace id (`1-...`, the root of the AWSTraceHeader the producer sent the message
-- with) of the delivery that last wrote the job's outcome: `sweeper inspect` shows it, so an
-- operator can open that job's trace. NULL when the message carried no trace header (the local
-- stack, tests, tracing off). An id, never customer data.
ALTER TABLE sweeper_jobs
    ADD COLUMN last_trace_id text CHECK (char_length(last_trace_id) <= 64);
