"""Admission: every limit a vendor call is under, behind one protocol (see base.py)."""

from sweeper.admission.bank import BatchSlots, GateLook
from sweeper.admission.base import (
    BLOCK_SHARE_OF_THREADS,
    BLOCK_SPAN_SECONDS,
    GATE_READ_LEAD_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    IN_FLIGHT_BOUND_SECONDS,
    MIN_CALL_SECONDS,
)
from sweeper.admission.pairing import PairedLimits

__all__ = [
    "BLOCK_SHARE_OF_THREADS",
    "BLOCK_SPAN_SECONDS",
    "GATE_READ_LEAD_SECONDS",
    "GATE_RECHECK_LEAD_SECONDS",
    "IN_FLIGHT_BOUND_SECONDS",
    "MIN_CALL_SECONDS",
    "BatchSlots",
    "GateLook",
    "PairedLimits",
]
