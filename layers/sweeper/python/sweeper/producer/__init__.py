"""The producer function's room: releasing due work (run, release), bounded where work is claimed
(claim_bounds, backpressure)."""
