"""The redrive function's room: moving dead letters back (run), on its own for throttled ones
(auto), paced by their limits (limits), what each letter was (letters) and the record it leaves
(log)."""
