"""The local stack: the real pipeline on one machine, without an AWS account or Docker."""
