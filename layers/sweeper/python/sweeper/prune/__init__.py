"""The prune function's room: what the ledger keeps and for how long (retention), and its run."""
