"""What every S3 key template keeps to, for discovery (which matches keys against it) and the
s3_delete action (which renders keys from it): each field in its own path segment.

Fields that share a segment (`e/{tenant_id}{object_id+}`, `e/{tenant_id}-{object_id}`) let a key
split more than one way: two obligations would render one key, and matching a key tries every
split, quadratic in its length (about 60 ms for a 1 KB key). With a "/" between any two fields,
a field can never take a character of the other's segment, so a key splits one way and a match
is linear in its length.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Final

_ANY_FIELD_RE: Final = re.compile(r"{[^{}]*}")


def fields_sharing_a_segment(template: str) -> tuple[str, str] | None:
    """The first two neighbouring fields with no "/" between them; None: each in its own."""
    for before, after in pairwise(_ANY_FIELD_RE.finditer(template)):
        if "/" not in template[before.end() : after.start()]:
            return before.group(), after.group()
    return None


def check_fields_apart(template: str) -> str:
    """The template, or ValueError naming the two fields that share a path segment."""
    shared = fields_sharing_a_segment(template)
    if shared is not None:
        first, second = shared
        raise ValueError(
            f"key_template fields {first} and {second} share a path segment: put each field "
            "in its own path segment, a / between them (e.g. exports/{tenant_id}/{object_id+})"
        )
    return template
