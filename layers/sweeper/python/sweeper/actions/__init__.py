"""The side effect a job asks for: action kinds behind one small interface.

Each kind is a module here (`http`, ...) holding its config model, its implementation, its
outcome mapping, its grants and network path, and its plan defaults (`sweeper.actions.base`
says what a kind provides). The policy's `action.kind` picks one (`sweeper.config.action`).
An action classifies what happened and never raises for an answer: it returns an
`ActionResult`. It raises only for bugs.
"""

from __future__ import annotations

from sweeper.actions.base import Action

__all__ = ["Action"]
