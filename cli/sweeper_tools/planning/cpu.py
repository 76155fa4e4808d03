"""What the consumers' CPU allows a plan (planning.plan's docstring states the model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.limits import MB_PER_VCPU

#: The share of an environment's CPU the plan fills. Busier, its threads are woken late for
#: their slots (measured here: with the machine 0.57-0.67 busy, under 0.3 % of slots were let go
#: late; at 0.99 busy, 1.6 slots per call).
CPU_BUSY_SHARE = 0.7


def vcpu_for(memory_mb: int) -> float:
    """The vCPU share Lambda gives a function of this memory."""
    return memory_mb / MB_PER_VCPU


@dataclass(frozen=True, slots=True)
class CpuBound:
    """What the consumers' CPU allows (see the module docstring), and what would carry the rate."""

    configured_mb: int
    per_job: float  # CPU seconds per job (0: not given, no bound)
    vcpu: float  # one environment's CPU at the configured memory, at most one vCPU
    per_environment: float  # jobs/s one environment completes with its CPU CPU_BUSY_SHARE full
    capacity: float  # jobs/s all environments complete with their CPU CPU_BUSY_SHARE full
    needed_vcpu: float  # per configured environment, to carry the rate
    environments: int  # environments that carry the rate at the configured memory

    @property
    def memory_mb(self) -> int:
        """The memory at which the configured environments carry the rate; at most one vCPU's."""
        if self.needed_vcpu <= self.vcpu:
            return self.configured_mb
        return min(MB_PER_VCPU, math.ceil(self.needed_vcpu * MB_PER_VCPU))

    def warning(self, policy: str, target: float) -> str:
        if self.vcpu >= 1:
            fix = f"raise environments to {self.environments} (one uses at most one vCPU)"
        elif self.needed_vcpu > 1:
            at_one_vcpu = math.ceil(target * self.per_job / CPU_BUSY_SHARE)
            fix = (
                f"raise environments to {self.environments}, or to {at_one_vcpu} with "
                f"consumer.memory_mb = {MB_PER_VCPU} (an environment uses at most one vCPU)"
            )
        else:
            fix = f"raise consumer.memory_mb to {self.memory_mb} or environments to "
            fix += str(self.environments)
        return (
            f"policy {policy} runs short of CPU: at {self.configured_mb} MB a consumer "
            f"environment has {self.vcpu:.2f} vCPU, about {self.per_environment:.1f} jobs/s at "
            f"{self.per_job * 1000:g} ms of CPU per job, {self.capacity:.1f} jobs/s in all "
            f"against a rate of {target:.1f}/s; {fix}"
        )


def cpu_bound(memory_mb: int, environments: int, target: float, per_job: float) -> CpuBound:
    """At `memory_mb` an environment, `per_job` CPU seconds a job (0: no bound), `target`/s."""
    vcpu = min(1.0, vcpu_for(memory_mb))
    if per_job <= 0:
        return CpuBound(memory_mb, per_job, vcpu, math.inf, math.inf, 0.0, environments)
    per_environment = vcpu * CPU_BUSY_SHARE / per_job
    return CpuBound(
        configured_mb=memory_mb,
        per_job=per_job,
        vcpu=vcpu,
        per_environment=per_environment,
        capacity=environments * per_environment,
        needed_vcpu=target * per_job / (environments * CPU_BUSY_SHARE),
        environments=max(environments, math.ceil(target / per_environment)),
    )
