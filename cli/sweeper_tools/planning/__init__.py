"""`sweeper plan`: what a policy needs (batch, concurrency, CPU) and what its limits allow."""
