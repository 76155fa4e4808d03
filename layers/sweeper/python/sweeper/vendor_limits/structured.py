"""The subset of HTTP Structured Fields (RFC 9651) the IETF RateLimit fields use: a List of
Items, each a bare item with parameters, read by hand.

Why not a library: the two fields need Lists of Items whose parameters are Integers, Strings,
Tokens, Byte Sequences or Booleans, about a hundred lines; a dependency in the Lambda layer for
that would be larger than the code it replaces, and the bounds a vendor's answer needs (its
length, how many members) would still be ours to write. What is outside the subset (an Inner
List, a Decimal used as a count, a Date, a Display String) fails the field, as RFC 9651 has a
parser fail a field it cannot read: the caller then learns nothing from it.

`parse_list` never raises: it answers the members, or None for a field that is not a List of
Items within the bounds.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

#: A field longer than this is not read (a vendor's policies fit in a few hundred characters).
MAX_FIELD_CHARS: Final = 4096
#: A List with more members than this is not read (a vendor states a handful of policies).
MAX_MEMBERS: Final = 16
#: Parameters per member; more fail the field.
MAX_PARAMS: Final = 16

BareItem = int | float | str | bytes | bool


@dataclass(frozen=True, slots=True)
class Token:
    """An sf-token (`burst`, `*foo`): kept apart from a String, as the grammar does."""

    text: str


Value = BareItem | Token


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a List: its bare item and its parameters (later keys win, as RFC 9651)."""

    item: Value
    params: dict[str, Value]


_INTEGER_RE: Final = re.compile(r"-?[0-9]{1,15}(?![0-9.])")
_DECIMAL_RE: Final = re.compile(r"-?[0-9]{1,12}\.[0-9]{1,3}(?![0-9.])")
_TOKEN_RE: Final = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_KEY_RE: Final = re.compile(r"[a-z*][a-z0-9_\-.*]{0,63}")
_BYTES_RE: Final = re.compile(r":([A-Za-z0-9+/=]*):")
_STRING_RE: Final = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


class _Unreadable(Exception):
    """The field is outside the subset (internal: `parse_list` answers None)."""


def parse_list(text: str | None) -> tuple[Member, ...] | None:
    """The members of a List field's value, or None when it is not one (or too large)."""
    if text is None or len(text) > MAX_FIELD_CHARS or not text.isascii():
        return None
    try:
        return _List(text).members()
    except _Unreadable:
        return None


class _List:
    def __init__(self, text: str) -> None:
        self.text = text.strip(" \t")
        self.at = 0

    def members(self) -> tuple[Member, ...]:
        members: list[Member] = []
        if not self.text:
            raise _Unreadable  # an empty List is the field's absence
        while True:
            members.append(self._member())
            if len(members) > MAX_MEMBERS:
                raise _Unreadable
            self._skip(" \t")
            if self.at == len(self.text):
                return tuple(members)
            if self.text[self.at] != ",":
                raise _Unreadable
            self.at += 1
            self._skip(" \t")
            if self.at == len(self.text):
                raise _Unreadable  # a trailing comma

    def _skip(self, chars: str) -> None:
        while self.at < len(self.text) and self.text[self.at] in chars:
            self.at += 1

    def _member(self) -> Member:
        item = self._bare_item()
        params: dict[str, Value] = {}
        while self.at < len(self.text) and self.text[self.at] == ";":
            self.at += 1
            self._skip(" ")
            key = self._match(_KEY_RE).group(0)
            value: Value = True
            if self.at < len(self.text) and self.text[self.at] == "=":
                self.at += 1
                value = self._bare_item()
            params[key] = value
            if len(params) > MAX_PARAMS:
                raise _Unreadable
        return Member(item, params)

    def _match(self, pattern: re.Pattern[str]) -> re.Match[str]:
        found = pattern.match(self.text, self.at)
        if found is None:
            raise _Unreadable
        self.at = found.end()
        return found

    def _bare_item(self) -> Value:
        if self.at >= len(self.text):
            raise _Unreadable
        first = self.text[self.at]
        if first == '"':
            raw = self._match(_STRING_RE).group(1)
            return re.sub(r"\\(.)", r"\1", raw)
        if first == ":":
            try:
                return base64.b64decode(self._match(_BYTES_RE).group(1), validate=True)
            except binascii.Error as exc:
                raise _Unreadable from exc
        if first == "?":
            flag = self.text[self.at + 1 : self.at + 2]
            if flag not in ("0", "1"):
                raise _Unreadable
            self.at += 2
            return flag == "1"
        if first == "-" or first.isdigit():
            decimal = _DECIMAL_RE.match(self.text, self.at)
            if decimal is not None:
                self.at = decimal.end()
                return float(decimal.group(0))
            return int(self._match(_INTEGER_RE).group(0))
        return Token(self._match(_TOKEN_RE).group(0))
