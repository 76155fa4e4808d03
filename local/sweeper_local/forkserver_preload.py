"""Imported only by the execution environments' forkserver: importing it is the preload."""

from sweeper_local import preload

preload.preload()
