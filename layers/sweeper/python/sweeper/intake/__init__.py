"""Hints and intake: the signed webhook, the intake queue and the function that drains it."""
