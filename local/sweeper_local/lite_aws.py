"""SQS and DynamoDB on loopback for the rate benchmark: the calls sweeper makes, with AWS's
semantics and AWS's costs, where moto's costs would be measured instead of sweeper's.

Why it exists (measured on the 2-core machine, moto 5.2.5): moto's ReceiveMessage walks every
message of the queue and deep-copies what it returns, so a receive took 0.03 s with 100
messages queued, 0.33 s with 1,000 and 0.66 s with 2,000 (SQS answers in milliseconds at any
depth); its DeleteMessage walks them too; and its DynamoDB carried about 200 conditional writes/s.
A benchmark at 100 calls/s needs about 250 DynamoDB writes/s and a queue thousands deep, so
against moto it measures moto. No maintained emulator fits: dynalite (npm) is faster but ignores
`ReturnValuesOnConditionCheckFailure`, on which the limiter and Powertools rely (a failed
condition then returns no item), so it would run another code path than AWS does.

This is written by hand, and kept small: one lock per service (each request atomic, as
DynamoDB's single-item writes are), a heap of visibility times per queue (a receive costs what
it returns, not the depth), and DynamoDB's expression language for top-level attributes. What
it does not support it refuses with a ValidationException naming the feature, so a new call in
sweeper fails loudly here rather than being answered wrongly. It counts every request by
service and operation (`GET /_lite/requests`), and the keys BatchGetItem read, which the
benchmark reports per job.

Where it is kinder than AWS, and what that does to the benchmark: a short-poll receive
returns every visible message up to the maximum (SQS samples a subset of its servers; the local
event source long-polls, as Lambda's pollers do); there is no throttling or partition limit
(the benchmark reports writes per scope so the per-item ceiling is read against them); TTL
deletes nothing (DynamoDB deletes expired items within days, so readers must check expiry
themselves, as Powertools does). Messages come out in the order they became visible, where a
standard queue keeps order only at best effort: a batch here holds the tenants as evenly as the
producer's claims sent them (in turn), in an account less evenly, and a batch whose busiest
scope has more records than the others runs longer on that scope's rate alone (the even
batches of scenario (d): docs/decisions.md, "(d)'s turnover taken apart on a quiet machine").

moto stays for everything else and for the tests; `LocalAws(lite=True)` routes only SQS and
DynamoDB here (AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_DYNAMODB), so the production boto3 code
is unchanged. Run: `python -m sweeper_local.lite_aws -p PORT`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import hashlib
import heapq
import itertools
import json
import re
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from http.server import ThreadingHTTPServer
from typing import Any

from sweeper_local.http_fields import FieldsHandler

ACCOUNT = "123456789012"
REGION = "us-east-1"
SQS_TARGET = "AmazonSQS."
DYNAMODB_TARGET = "DynamoDB_20120810."
REQUESTS_PATH = "/_lite/requests"
#: Appended to an operation's name in the request counts for its conditional checks that failed
#: (`dynamodb:UpdateItem` counts every request, `dynamodb:UpdateItem:condition_failed` those).
FAILED_CONDITION = ":condition_failed"
#: Appended to BatchGetItem's name in the request counts for the keys its requests read: each
#: is a read unit on AWS (an item under 4 KB, read consistently), as one GetItem is.
KEYS_READ = ":keys"

#: SQS's limits (the SQS Developer Guide's quotas page).
SQS_MAX_BATCH = 10
SQS_MAX_WAIT_SECONDS = 20
SQS_MAX_VISIBILITY_SECONDS = 43_200
SQS_MAX_MESSAGE_BYTES = 262_144
SQS_MAX_DELAY_SECONDS = 900
SQS_DEFAULT_VISIBILITY_SECONDS = 30
SQS_DEFAULT_RETENTION_SECONDS = 345_600
#: The most keys one BatchGetItem reads (the DynamoDB Developer Guide's BatchGetItem page).
DYNAMODB_MAX_BATCH_GET = 100

Item = dict[str, dict[str, Any]]


class ApiError(Exception):
    """An error answer: HTTP 400 with AWS's error type (and SQS's query-compatible code)."""

    def __init__(self, code: str, message: str, *, query_code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.query_code = query_code
        self.item: Item | None = None  # ReturnValuesOnConditionCheckFailure


def _validation(message: str) -> ApiError:
    return ApiError("ValidationException", message)


# --- DynamoDB values -----------------------------------------------------------------------


def _number(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise _validation(f"invalid number: {text!r}") from exc


def _number_text(value: Decimal) -> str:
    """DynamoDB's canonical form: no exponent, no trailing zeros."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _comparable(value: dict[str, Any]) -> tuple[str, Any]:
    (kind, raw), *rest = value.items()
    if rest:
        raise _validation("an attribute value has exactly one type")
    if kind == "N":
        return kind, _number(raw)
    if kind in ("S", "B", "BOOL", "NULL"):
        return kind, raw
    if kind in ("SS", "BS"):
        return kind, frozenset(raw)
    if kind == "NS":
        return kind, frozenset(_number(n) for n in raw)
    return kind, json.dumps(raw, sort_keys=True)  # L, M: compared whole


# --- DynamoDB expressions ------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<op><>|<=|>=|[=<>(),+\-])|(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<bad>\S))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}
_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "begins_with", "contains", "size"}


@dataclass
class _Tokens:
    items: list[tuple[str, str]]
    at: int = 0

    def peek(self) -> tuple[str, str]:
        return self.items[self.at] if self.at < len(self.items) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.at += 1
        return token

    def expect(self, text: str) -> None:
        _, got = self.take()
        if got.upper() != text:
            raise _validation(f"expected {text!r} in the expression, found {got!r}")

    def keyword(self, word: str) -> bool:
        kind, text = self.peek()
        if kind == "word" and text.upper() == word:
            self.at += 1
            return True
        return False


def _tokens(expression: str) -> _Tokens:
    found: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup
        if kind is None:
            continue
        text = match.group(kind)
        if kind == "bad":
            what = "nested attribute paths" if text in ".[]" else f"the character {text!r}"
            raise _validation(f"the stand-in does not support {what}")
        found.append((kind, text))
    return _Tokens(found)


Values = dict[str, dict[str, Any]]


@dataclass
class _Context:
    """One request's expression names and values, and which of them its expressions used.

    Compiling an expression reads only the names (an expression compiles to closures over
    attribute names and value placeholders); the values are read when it runs, so one
    compiled expression serves every request with its text and its names (`_compiled`).
    """

    names: dict[str, str]
    values: Values
    used_names: set[str] = field(default_factory=set)
    used_values: set[str] = field(default_factory=set)
    #: The value placeholders in the order the expressions use them (the first undefined one
    #: is the one named in the error, as DynamoDB names it).
    placeholders: list[str] = field(default_factory=list)

    def name(self, token: tuple[str, str]) -> str:
        kind, text = token
        if kind == "name":
            if text not in self.names:
                raise _validation(f"An expression attribute name used is not defined: {text}")
            self.used_names.add(text)
            return self.names[text]
        if kind == "word" and text.upper() not in _KEYWORDS:
            return text
        raise _validation(f"an attribute name was expected, found {text!r}")

    def value(self, text: str) -> str:
        """A value placeholder the expression uses (checked against a request's values when
        the compiled expression is bound to it: `_Compiled.bind`)."""
        if text not in self.used_values:
            self.used_values.add(text)
            self.placeholders.append(text)
        return text

    def condition(self, expression: str) -> Condition:
        condition: Condition = _compiled("condition", expression, _names_key(self.names), ()).bind(
            self
        )
        return condition

    def update(self, expression: str, key_names: list[str]) -> Update:
        key = tuple(key_names)
        update: Update = _compiled("update", expression, _names_key(self.names), key).bind(self)
        return update

    def projection(self, expression: str | None) -> Callable[[Item], Item]:
        if not expression:
            return _whole
        project: Callable[[Item], Item] = _compiled(
            "projection", expression, _names_key(self.names), ()
        ).bind(self)
        return project

    def check_all_used(self) -> None:
        unused_values = set(self.values) - self.used_values
        if unused_values:
            raise _validation(
                "Value provided in ExpressionAttributeValues unused in expressions: "
                f"keys: {{{', '.join(sorted(unused_values))}}}"
            )
        unused_names = set(self.names) - self.used_names
        if unused_names:
            raise _validation(
                "Value provided in ExpressionAttributeNames unused in expressions: "
                f"keys: {{{', '.join(sorted(unused_names))}}}"
            )


Operand = Callable[[Item, Values], dict[str, Any] | None]
Condition = Callable[[Item, Values], bool]


def _operand(tokens: _Tokens, ctx: _Context) -> Operand:
    kind, text = tokens.peek()
    if kind == "value":
        tokens.take()
        placeholder = ctx.value(text)
        return lambda item, values: values[placeholder]
    if kind == "word" and text == "size":
        tokens.take()
        tokens.expect("(")
        path = ctx.name(tokens.take())
        tokens.expect(")")

        def size(item: Item, values: Values) -> dict[str, Any] | None:
            found = item.get(path)
            if found is None:
                return None
            ((kind, raw),) = found.items()
            return {"N": str(len(raw.encode() if kind == "S" else raw))}

        return size
    path = ctx.name(tokens.take())
    return lambda item, values: item.get(path)


def _compare(op: str, left: dict[str, Any] | None, right: dict[str, Any] | None) -> bool:
    if left is None or right is None:
        return False  # a missing attribute compares false, even with <>
    (lkind, lval), (rkind, rval) = _comparable(left), _comparable(right)
    if op == "=":
        return bool(lkind == rkind and lval == rval)
    if op == "<>":
        return not (lkind == rkind and lval == rval)
    if lkind != rkind or lkind not in ("N", "S", "B"):
        return False
    return bool({"<": lval < rval, "<=": lval <= rval, ">": lval > rval, ">=": lval >= rval}[op])


def _condition(tokens: _Tokens, ctx: _Context) -> Condition:
    left = _conjunction(tokens, ctx)
    while tokens.keyword("OR"):
        right = _conjunction(tokens, ctx)
        left = (lambda a, b: lambda item, v: a(item, v) or b(item, v))(left, right)
    return left


def _conjunction(tokens: _Tokens, ctx: _Context) -> Condition:
    left = _negation(tokens, ctx)
    while tokens.keyword("AND"):
        right = _negation(tokens, ctx)
        left = (lambda a, b: lambda item, v: a(item, v) and b(item, v))(left, right)
    return left


def _negation(tokens: _Tokens, ctx: _Context) -> Condition:
    if tokens.keyword("NOT"):
        inner = _negation(tokens, ctx)
        return lambda item, values: not inner(item, values)
    return _predicate(tokens, ctx)


def _predicate(tokens: _Tokens, ctx: _Context) -> Condition:
    kind, text = tokens.peek()
    if (kind, text) == ("op", "("):
        tokens.take()
        inner = _condition(tokens, ctx)
        tokens.expect(")")
        return inner
    if kind == "word" and text in _FUNCTIONS and text != "size":
        return _function(tokens, ctx)
    left = _operand(tokens, ctx)
    if tokens.keyword("BETWEEN"):
        low = _operand(tokens, ctx)
        tokens.expect("AND")
        high = _operand(tokens, ctx)
        return lambda item, v: (
            _compare(">=", left(item, v), low(item, v))
            and _compare("<=", left(item, v), high(item, v))
        )
    if tokens.keyword("IN"):
        tokens.expect("(")
        options = [_operand(tokens, ctx)]
        while tokens.peek() == ("op", ","):
            tokens.take()
            options.append(_operand(tokens, ctx))
        tokens.expect(")")
        return lambda item, v: any(_compare("=", left(item, v), o(item, v)) for o in options)
    kind, op = tokens.take()
    if op not in ("=", "<>", "<", "<=", ">", ">="):
        raise _validation(f"a comparison was expected, found {op!r}")
    right = _operand(tokens, ctx)
    return lambda item, values: _compare(op, left(item, values), right(item, values))


def _function(tokens: _Tokens, ctx: _Context) -> Condition:
    _, name = tokens.take()
    tokens.expect("(")
    path = ctx.name(tokens.take())
    argument: Operand | None = None
    if name in ("begins_with", "contains"):
        tokens.expect(",")
        argument = _operand(tokens, ctx)
    tokens.expect(")")
    if name == "attribute_exists":
        return lambda item, values: path in item
    if name == "attribute_not_exists":
        return lambda item, values: path not in item
    assert argument is not None
    arg = argument

    def test(item: Item, values: Values) -> bool:
        found, wanted = item.get(path), arg(item, values)
        if found is None or wanted is None:
            return False
        ((kind, raw),) = found.items()
        ((wkind, want),) = wanted.items()
        if name == "begins_with":
            return kind == wkind and kind in ("S", "B") and str(raw).startswith(str(want))
        if kind in ("S",):
            return wkind == "S" and str(want) in raw
        if kind in ("SS", "NS", "BS"):
            return want in raw
        if kind == "L":
            return wanted in raw
        return False

    return test


def parse_condition(expression: str, ctx: _Context) -> Condition:
    tokens = _tokens(expression)
    condition = _condition(tokens, ctx)
    if tokens.peek()[0] != "end":
        raise _validation(f"unexpected {tokens.peek()[1]!r} in the condition expression")
    return condition


Update = Callable[[Item, Values], set[str]]  # applies itself to the item; the names it set


def _set_value(tokens: _Tokens, ctx: _Context) -> Operand:
    kind, text = tokens.peek()
    if kind == "word" and text in ("if_not_exists", "list_append"):
        tokens.take()
        tokens.expect("(")
        if text == "if_not_exists":
            path = ctx.name(tokens.take())
            tokens.expect(",")
            default = _set_value(tokens, ctx)
            tokens.expect(")")
            left: Operand = lambda item, v: item.get(path) or default(item, v)  # noqa: E731
        else:
            first = _set_value(tokens, ctx)
            tokens.expect(",")
            second = _set_value(tokens, ctx)
            tokens.expect(")")

            def left(item: Item, values: Values) -> dict[str, Any] | None:
                a, b = first(item, values), second(item, values)
                if a is None or b is None or "L" not in a or "L" not in b:
                    raise _validation("list_append needs two lists")
                return {"L": [*a["L"], *b["L"]]}

    else:
        left = _operand(tokens, ctx)
    kind, op = tokens.peek()
    if (kind, op) in (("op", "+"), ("op", "-")):
        tokens.take()
        right = _set_value(tokens, ctx)
        sign = 1 if op == "+" else -1

        def arithmetic(item: Item, values: Values) -> dict[str, Any] | None:
            a, b = left(item, values), right(item, values)
            if a is None or b is None:
                raise _validation(
                    "The provided expression refers to an attribute that does not exist in the item"
                )
            if "N" not in a or "N" not in b:
                raise _validation("An operand in the update expression has an incorrect data type")
            return {"N": _number_text(_number(a["N"]) + sign * _number(b["N"]))}

        return arithmetic
    return left


def parse_update(expression: str, ctx: _Context, key_names: set[str]) -> Update:
    tokens = _tokens(expression)
    # (item, before, values) -> the name it wrote
    actions: list[Callable[[Item, Item, Values], str]] = []
    seen: set[str] = set()
    while tokens.peek()[0] != "end":
        clause = tokens.take()[1].upper()
        if clause not in ("SET", "REMOVE", "ADD", "DELETE") or clause in seen:
            raise _validation(f"invalid or repeated update clause {clause!r}")
        seen.add(clause)
        while True:
            path = ctx.name(tokens.take())
            if path in key_names:
                raise _validation(
                    f"Cannot update attribute {path}. This attribute is part of the key"
                )
            if clause == "SET":
                tokens.expect("=")
                value = _set_value(tokens, ctx)
                actions.append(_assign(path, value))
            elif clause == "REMOVE":
                actions.append(_remove(path))
            else:
                kind, text = tokens.take()
                if kind != "value":
                    raise _validation(f"{clause} needs a value, found {text!r}")
                actions.append(_add(path, ctx.value(text), delete=clause == "DELETE"))
            if tokens.peek() != ("op", ","):
                break
            tokens.take()

    def apply(item: Item, values: Values) -> set[str]:
        before = dict(item)  # every operand reads the item as it was before the update
        return {action(item, before, values) for action in actions}

    return apply


def _assign(path: str, value: Operand) -> Callable[[Item, Item, Values], str]:
    def action(item: Item, before: Item, values: Values) -> str:
        new = value(before, values)
        if new is None:
            raise _validation(
                "The provided expression refers to an attribute that does not exist in the item"
            )
        item[path] = new
        return path

    return action


def _remove(path: str) -> Callable[[Item, Item, Values], str]:
    def action(item: Item, before: Item, values: Values) -> str:
        item.pop(path, None)
        return path

    return action


def _add(path: str, placeholder: str, *, delete: bool) -> Callable[[Item, Item, Values], str]:
    def action(item: Item, before: Item, values: Values) -> str:
        current = before.get(path)
        ((kind, raw),) = values[placeholder].items()
        if kind == "N" and not delete:
            base = _number(current["N"]) if current else Decimal(0)
            item[path] = {"N": _number_text(base + _number(raw))}
        elif kind in ("SS", "NS", "BS"):
            members = set(current[kind]) if current else set()
            members = members - set(raw) if delete else members | set(raw)
            if members:
                item[path] = {kind: sorted(members)}
            else:
                item.pop(path, None)
        else:
            raise _validation(f"ADD/DELETE cannot take a value of type {kind}")
        return path

    return action


def _projection(expression: str | None, ctx: _Context) -> Callable[[Item], Item]:
    if not expression:
        return lambda item: item
    tokens = _tokens(expression)
    names = [ctx.name(tokens.take())]
    while tokens.peek() == ("op", ","):
        tokens.take()
        names.append(ctx.name(tokens.take()))
    if tokens.peek()[0] != "end":
        raise _validation("invalid projection expression")
    return lambda item: {n: item[n] for n in names if n in item}


def _whole(item: Item) -> Item:
    return item


#: How many compiled expressions are kept. The limiter, Powertools' idempotency and the tests
#: send a few dozen distinct expressions, each with new values on every request; parsing one
#: took a tenth of the stand-in's CPU per DynamoDB request.
EXPRESSION_CACHE_SIZE = 512


@dataclass(frozen=True)
class _Compiled:
    """An expression compiled for one names map: closures over attribute names and value
    placeholders, run with a request's values."""

    run: Any
    names: frozenset[str]
    placeholders: tuple[str, ...]

    def bind(self, ctx: _Context) -> Any:
        """The compiled expression for `ctx`'s request: its values must define every
        placeholder the expression uses; what it used counts towards `check_all_used`."""
        for placeholder in self.placeholders:
            if placeholder not in ctx.values:
                raise _validation(
                    f"An expression attribute value used is not defined: {placeholder}"
                )
        ctx.used_names |= self.names
        ctx.used_values.update(self.placeholders)
        return self.run


def _names_key(names: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(names.items()))


@functools.lru_cache(maxsize=EXPRESSION_CACHE_SIZE)
def _compiled(
    kind: str, expression: str, names: tuple[tuple[str, str], ...], key_names: tuple[str, ...]
) -> _Compiled:
    """Compile an expression once per (kind, text, names map, table key): the names map is
    part of the key because compiling resolves `#name` placeholders to attribute names; the
    values are not, as they are read when the expression runs. An expression that does not
    compile raises, and nothing is cached for it."""
    ctx = _Context(dict(names), {})
    run: Any
    if kind == "condition":
        run = parse_condition(expression, ctx)
    elif kind == "update":
        run = parse_update(expression, ctx, set(key_names))
    else:
        run = _projection(expression, ctx)
    return _Compiled(run, frozenset(ctx.used_names), tuple(ctx.placeholders))


# --- DynamoDB ------------------------------------------------------------------------------


@dataclass
class _Table:
    name: str
    key_schema: list[dict[str, str]]
    attribute_definitions: list[dict[str, str]]
    created: float
    items: dict[tuple[str, ...], Item] = field(default_factory=dict)
    ttl_attribute: str | None = None

    @property
    def key_names(self) -> list[str]:
        return [k["AttributeName"] for k in self.key_schema]

    def key_of(self, key: Item, *, whole_item: bool = False) -> tuple[str, ...]:
        names = self.key_names
        if not whole_item and set(key) != set(names):
            raise _validation("The provided key element does not match the schema")
        types = {a["AttributeName"]: a["AttributeType"] for a in self.attribute_definitions}
        parts = []
        for name in names:
            value = key.get(name)
            if value is None or types[name] not in value:
                raise _validation(
                    f"One or more parameter values were invalid: Missing the key {name} in the item"
                    if value is None
                    else f"Type mismatch for key {name}"
                )
            parts.append(str(value[types[name]]))
        return tuple(parts)

    def describe(self) -> dict[str, Any]:
        return {
            "TableName": self.name,
            "TableStatus": "ACTIVE",
            "KeySchema": self.key_schema,
            "AttributeDefinitions": self.attribute_definitions,
            "CreationDateTime": self.created,
            "ItemCount": len(self.items),
            "TableArn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{self.name}",
            "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
        }


class DynamoDb:
    """The operations sweeper, Powertools idempotency and the tests call."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}
        self._lock = threading.Lock()

    def handle(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise ApiError("UnknownOperationException", f"the stand-in has no {operation}")
        with self._lock:
            result: dict[str, Any] = handler(request)
            return result

    def _table(self, request: dict[str, Any]) -> _Table:
        name = request.get("TableName", "")
        if name not in self._tables:
            raise ApiError("ResourceNotFoundException", "Requested resource not found")
        return self._tables[name]

    @staticmethod
    def _context(request: dict[str, Any]) -> _Context:
        return _Context(
            dict(request.get("ExpressionAttributeNames") or {}),
            dict(request.get("ExpressionAttributeValues") or {}),
        )

    def op_CreateTable(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["TableName"]
        if name in self._tables:
            raise ApiError("ResourceInUseException", f"Table already exists: {name}")
        if request.get("GlobalSecondaryIndexes") or request.get("LocalSecondaryIndexes"):
            raise _validation("the stand-in does not support secondary indexes")
        table = _Table(name, request["KeySchema"], request["AttributeDefinitions"], time.time())
        self._tables[name] = table
        return {"TableDescription": table.describe()}

    def op_DescribeTable(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"Table": self._table(request).describe()}

    def op_DeleteTable(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        del self._tables[table.name]
        return {"TableDescription": table.describe()}

    def op_ListTables(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"TableNames": sorted(self._tables)}

    def op_UpdateTimeToLive(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = request["TimeToLiveSpecification"]
        self._table(request).ttl_attribute = spec["AttributeName"] if spec["Enabled"] else None
        return {"TimeToLiveSpecification": spec}

    def op_DescribeTimeToLive(self, request: dict[str, Any]) -> dict[str, Any]:
        attribute = self._table(request).ttl_attribute
        if attribute is None:
            return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
        return {
            "TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": attribute}
        }

    def _check(self, request: dict[str, Any], ctx: _Context, item: Item | None) -> None:
        expression = request.get("ConditionExpression")
        if expression is None:
            return
        if not ctx.condition(expression)(item or {}, ctx.values):
            error = ApiError("ConditionalCheckFailedException", "The conditional request failed")
            if request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and item:
                error.item = item
            raise error

    def op_GetItem(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        ctx = self._context(request)
        project = ctx.projection(request.get("ProjectionExpression"))
        ctx.check_all_used()
        item = table.items.get(table.key_of(request["Key"]))
        return {} if item is None else {"Item": project(item)}

    def op_BatchGetItem(self, request: dict[str, Any]) -> dict[str, Any]:
        """Every key asked for is read (DynamoDB may leave some in `UnprocessedKeys`, under
        throttling or past 16 MB: the stand-in never does), each read consistently."""
        wanted: dict[str, Any] = request["RequestItems"]
        if not wanted:
            raise _validation("The requestItems parameter is required for BatchGetItem")
        if sum(len(spec["Keys"]) for spec in wanted.values()) > DYNAMODB_MAX_BATCH_GET:
            raise _validation("Too many items requested for the BatchGetItem call")
        responses: dict[str, list[Item]] = {}
        for name, spec in wanted.items():
            if "AttributesToGet" in spec:
                raise _validation("the stand-in does not support AttributesToGet")
            table = self._table({"TableName": name})
            ctx = self._context(spec)
            project = ctx.projection(spec.get("ProjectionExpression"))
            ctx.check_all_used()
            keys = [table.key_of(key) for key in spec["Keys"]]
            if not keys:
                raise _validation(f"Member must have length greater than or equal to 1: {name}")
            if len(set(keys)) != len(keys):
                raise _validation("Provided list of item keys contains duplicates")
            responses[name] = [project(table.items[key]) for key in keys if key in table.items]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def op_PutItem(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        new: Item = request["Item"]
        key = table.key_of(new, whole_item=True)
        ctx = self._context(request)
        old = table.items.get(key)
        self._check(request, ctx, old)
        ctx.check_all_used()
        table.items[key] = dict(new)
        return {"Attributes": old} if old and request.get("ReturnValues") == "ALL_OLD" else {}

    def op_DeleteItem(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        key = table.key_of(request["Key"])
        ctx = self._context(request)
        old = table.items.get(key)
        self._check(request, ctx, old)
        ctx.check_all_used()
        table.items.pop(key, None)
        return {"Attributes": old} if old and request.get("ReturnValues") == "ALL_OLD" else {}

    def op_UpdateItem(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        key_item = request["Key"]
        key = table.key_of(key_item)
        ctx = self._context(request)
        update = ctx.update(request.get("UpdateExpression", ""), table.key_names)
        old = table.items.get(key)
        self._check(request, ctx, old)
        ctx.check_all_used()
        item: Item = dict(old) if old else dict(key_item)
        written = update(item, ctx.values)
        table.items[key] = item
        returns = request.get("ReturnValues", "NONE")
        if returns == "ALL_NEW":
            return {"Attributes": item}
        if returns == "ALL_OLD":
            return {"Attributes": old} if old else {}
        if returns == "UPDATED_NEW":
            return {"Attributes": {n: item[n] for n in written if n in item}}
        if returns == "UPDATED_OLD":
            return {"Attributes": {n: old[n] for n in written if old and n in old}}
        return {}

    def op_Scan(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        ctx = self._context(request)
        keep = ctx.condition(request["FilterExpression"]) if "FilterExpression" in request else None
        project = ctx.projection(request.get("ProjectionExpression"))
        ctx.check_all_used()
        keys = list(table.items)
        start = 0
        if request.get("ExclusiveStartKey"):
            after = table.key_of(request["ExclusiveStartKey"])
            start = keys.index(after) + 1 if after in keys else len(keys)
        limit = int(request.get("Limit") or len(keys) or 1)
        page = keys[start : start + limit]
        found = [
            project(table.items[k])
            for k in page
            if keep is None or keep(table.items[k], ctx.values)
        ]
        answer: dict[str, Any] = {"Items": found, "Count": len(found), "ScannedCount": len(page)}
        if start + limit < len(keys):
            last = table.items[page[-1]]
            answer["LastEvaluatedKey"] = {n: last[n] for n in table.key_names}
        return answer


# --- SQS -----------------------------------------------------------------------------------


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()  # noqa: S324 - SQS's body checksum


@dataclass
class _Message:
    id: str
    body: str
    sent_ms: int
    group_id: str | None
    visible_at: float
    receive_count: int = 0
    first_receive_ms: int | None = None
    receipt: str | None = None
    #: The `AWSTraceHeader` system attribute it was sent with (the only one SQS takes).
    trace_header: str | None = None


@dataclass
class _Queue:
    name: str
    url: str
    attributes: dict[str, str]
    created: int
    messages: dict[str, _Message] = field(default_factory=dict)
    #: (visible_at, order, message id): one entry per time a message's visibility was set;
    #: an entry whose time no longer matches its message is stale and skipped.
    due: list[tuple[float, int, str]] = field(default_factory=list)

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{self.name}"

    def int_attribute(self, name: str, default: int) -> int:
        return int(self.attributes.get(name, default))


class Sqs:
    """Standard queues: visibility timeouts, long polling, redrive to a DLQ, batches."""

    def __init__(self, base_url: Callable[[], str]) -> None:
        self._base_url = base_url
        self._queues: dict[str, _Queue] = {}
        self._lock = threading.Condition()
        self._order = itertools.count()
        self._receipts: dict[str, tuple[str, str]] = {}  # receipt -> (queue, message id)

    def handle(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise ApiError(
                "UnsupportedOperation",
                f"the stand-in has no {operation}",
                query_code="AWS.SimpleQueueService.UnsupportedOperation",
            )
        with self._lock:
            result: dict[str, Any] = handler(request)
            return result

    def _queue(self, request: dict[str, Any]) -> _Queue:
        name = str(request.get("QueueUrl", "")).rstrip("/").rsplit("/", 1)[-1]
        if name not in self._queues:
            raise ApiError(
                "QueueDoesNotExist",
                "The specified queue does not exist.",
                query_code="AWS.SimpleQueueService.NonExistentQueue",
            )
        return self._queues[name]

    def _queue_by_arn(self, arn: str) -> _Queue | None:
        return self._queues.get(arn.rsplit(":", 1)[-1])

    @staticmethod
    def _invalid(message: str) -> ApiError:
        return ApiError("InvalidParameterValue", message, query_code="InvalidParameterValue")

    def op_CreateQueue(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["QueueName"]
        if name.endswith(".fifo"):
            raise self._invalid("the stand-in serves standard queues only")
        attributes = dict(request.get("Attributes") or {})
        existing = self._queues.get(name)
        if existing is not None:
            if any(existing.attributes.get(k) != v for k, v in attributes.items()):
                raise ApiError(
                    "QueueNameExists",
                    "A queue already exists with the same name and a different value for "
                    "attribute(s)",
                    query_code="QueueAlreadyExists",
                )
            return {"QueueUrl": existing.url}
        url = f"{self._base_url()}/{ACCOUNT}/{name}"
        self._queues[name] = _Queue(name, url, attributes, int(time.time()))
        return {"QueueUrl": url}

    def op_GetQueueUrl(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"QueueUrl": self._queue({"QueueUrl": request["QueueName"]}).url}

    def op_ListQueues(self, request: dict[str, Any]) -> dict[str, Any]:
        prefix = request.get("QueueNamePrefix", "")
        return {"QueueUrls": [q.url for n, q in self._queues.items() if n.startswith(prefix)]}

    def op_DeleteQueue(self, request: dict[str, Any]) -> dict[str, Any]:
        del self._queues[self._queue(request).name]
        return {}

    def op_PurgeQueue(self, request: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(request)
        queue.messages.clear()
        queue.due.clear()
        return {}

    def op_SetQueueAttributes(self, request: dict[str, Any]) -> dict[str, Any]:
        self._queue(request).attributes.update(request.get("Attributes") or {})
        return {}

    def op_GetQueueAttributes(self, request: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(request)
        now = time.time()
        visible = delayed = in_flight = 0
        for message in queue.messages.values():
            if message.visible_at <= now:
                visible += 1
            elif message.receipt is None:
                delayed += 1
            else:
                in_flight += 1
        every = {
            "QueueArn": queue.arn,
            "ApproximateNumberOfMessages": str(visible),
            "ApproximateNumberOfMessagesNotVisible": str(in_flight),
            "ApproximateNumberOfMessagesDelayed": str(delayed),
            "CreatedTimestamp": str(queue.created),
            "LastModifiedTimestamp": str(queue.created),
            "VisibilityTimeout": str(
                queue.int_attribute("VisibilityTimeout", SQS_DEFAULT_VISIBILITY_SECONDS)
            ),
            "MessageRetentionPeriod": str(
                queue.int_attribute("MessageRetentionPeriod", SQS_DEFAULT_RETENTION_SECONDS)
            ),
            "DelaySeconds": str(queue.int_attribute("DelaySeconds", 0)),
            "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES),
            "ReceiveMessageWaitTimeSeconds": str(
                queue.int_attribute("ReceiveMessageWaitTimeSeconds", 0)
            ),
            **{k: v for k, v in queue.attributes.items() if k == "RedrivePolicy"},
        }
        names = request.get("AttributeNames") or []
        if "All" in names:
            return {"Attributes": every}
        return {"Attributes": {n: every[n] for n in names if n in every}}

    def _enqueue(self, queue: _Queue, entry: dict[str, Any]) -> dict[str, str]:
        body = entry.get("MessageBody", "")
        if not body:
            raise self._invalid("The request must contain the parameter MessageBody.")
        if len(body.encode("utf-8")) > SQS_MAX_MESSAGE_BYTES:
            raise self._invalid(
                "One or more parameters are invalid. Reason: Message must be shorter than "
                f"{SQS_MAX_MESSAGE_BYTES} bytes."
            )
        if entry.get("MessageAttributes"):
            raise self._invalid("the stand-in does not support message attributes")
        trace_header = self._trace_header(entry.get("MessageSystemAttributes") or {})
        delay = int(entry.get("DelaySeconds", queue.int_attribute("DelaySeconds", 0)))
        if not 0 <= delay <= SQS_MAX_DELAY_SECONDS:
            raise self._invalid(f"Value {delay} for parameter DelaySeconds is invalid.")
        now = time.time()
        message = _Message(
            str(uuid.uuid4()), body, int(now * 1000), entry.get("MessageGroupId"), now + delay
        )
        message.trace_header = trace_header
        queue.messages[message.id] = message
        heapq.heappush(queue.due, (message.visible_at, next(self._order), message.id))
        self._lock.notify_all()
        return {"MessageId": message.id, "MD5OfMessageBody": _md5(body)}

    def _trace_header(self, system: dict[str, Any]) -> str | None:
        """SQS takes one message system attribute, `AWSTraceHeader`, a String."""
        if not system:
            return None
        header = system.get("AWSTraceHeader")
        if set(system) != {"AWSTraceHeader"} or not isinstance(header, dict):
            raise self._invalid("Message system attribute name must be AWSTraceHeader.")
        if header.get("DataType") != "String" or not header.get("StringValue"):
            raise self._invalid("Message system attribute AWSTraceHeader must be a String.")
        return str(header["StringValue"])

    def op_SendMessage(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._enqueue(self._queue(request), request)

    @staticmethod
    def _batch(entries: list[dict[str, Any]]) -> None:
        if not entries:
            raise ApiError(
                "EmptyBatchRequest",
                "There should be at least one SendMessageBatchRequestEntry in the request.",
                query_code="AWS.SimpleQueueService.EmptyBatchRequest",
            )
        if len(entries) > SQS_MAX_BATCH:
            raise ApiError(
                "TooManyEntriesInBatchRequest",
                f"Maximum number of entries per request are {SQS_MAX_BATCH}.",
                query_code="AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            )
        ids = [e.get("Id") for e in entries]
        if len(set(ids)) != len(ids):
            raise ApiError(
                "BatchEntryIdsNotDistinct",
                "Two or more batch entries in the request have the same Id.",
                query_code="AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            )

    def op_SendMessageBatch(self, request: dict[str, Any]) -> dict[str, Any]:
        self._batch(request.get("Entries") or [])
        total = sum(len(e.get("MessageBody", "").encode("utf-8")) for e in request["Entries"])
        if total > SQS_MAX_MESSAGE_BYTES:
            raise ApiError(
                "BatchRequestTooLong",
                "Batch requests cannot be longer than 262144 bytes.",
                query_code="AWS.SimpleQueueService.BatchRequestTooLong",
            )
        return self._each(request, self._enqueue)

    def op_ReceiveMessage(self, request: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(request)
        wanted = int(request.get("MaxNumberOfMessages", 1))
        if not 1 <= wanted <= SQS_MAX_BATCH:
            raise self._invalid(
                f"Value {wanted} for parameter MaxNumberOfMessages is invalid. "
                "Reason: Must be between 1 and 10, if provided."
            )
        wait = int(
            request.get("WaitTimeSeconds", queue.int_attribute("ReceiveMessageWaitTimeSeconds", 0))
        )
        if not 0 <= wait <= SQS_MAX_WAIT_SECONDS:
            raise self._invalid(
                f"Value {wait} for parameter WaitTimeSeconds is invalid. "
                "Reason: Must be >= 0 and <= 20, if provided."
            )
        visibility = int(
            request.get(
                "VisibilityTimeout",
                queue.int_attribute("VisibilityTimeout", SQS_DEFAULT_VISIBILITY_SECONDS),
            )
        )
        if not 0 <= visibility <= SQS_MAX_VISIBILITY_SECONDS:
            raise self._invalid(f"Value {visibility} for parameter VisibilityTimeout is invalid.")
        names = set(request.get("MessageSystemAttributeNames") or []) | set(
            request.get("AttributeNames") or []
        )
        deadline = time.time() + wait
        while True:
            received = self._take(queue, wanted, visibility)
            remaining = deadline - time.time()
            if received or remaining <= 0 or queue.name not in self._queues:
                break
            next_due = queue.due[0][0] - time.time() if queue.due else remaining
            self._lock.wait(timeout=max(0.001, min(remaining, next_due)))
        return {"Messages": [self._shape(m, names) for m in received]}

    def _take(self, queue: _Queue, wanted: int, visibility: int) -> list[_Message]:
        now = time.time()
        retention = queue.int_attribute("MessageRetentionPeriod", SQS_DEFAULT_RETENTION_SECONDS)
        redrive = json.loads(queue.attributes.get("RedrivePolicy") or "null")
        taken: list[_Message] = []
        while queue.due and queue.due[0][0] <= now and len(taken) < wanted:
            stamp, _, message_id = heapq.heappop(queue.due)
            message = queue.messages.get(message_id)
            if message is None or message.visible_at != stamp:
                continue  # deleted, or its visibility was set again since
            if now * 1000 - message.sent_ms > retention * 1000:
                del queue.messages[message_id]
                continue
            if redrive and message.receive_count >= int(redrive["maxReceiveCount"]):
                target = self._queue_by_arn(redrive["deadLetterTargetArn"])
                del queue.messages[message_id]
                if target is not None:  # the DLQ keeps the message's id, body and sent time
                    message.receipt = None
                    message.visible_at = now
                    target.messages[message.id] = message
                    heapq.heappush(target.due, (now, next(self._order), message.id))
                continue
            message.receive_count += 1
            message.first_receive_ms = message.first_receive_ms or int(now * 1000)
            message.receipt = base64.b64encode(
                f"{queue.name} {message.id} {secrets.token_hex(8)}".encode()
            ).decode()
            self._receipts[message.receipt] = (queue.name, message.id)
            message.visible_at = now + visibility
            taken.append(message)
        # Pushed back once the response is complete: with a visibility timeout of 0 a message
        # is due again at once, and must not be handed out twice in one response.
        for message in taken:
            heapq.heappush(queue.due, (message.visible_at, next(self._order), message.id))
        return taken

    @staticmethod
    def _shape(message: _Message, names: set[str]) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "MessageId": message.id,
            "ReceiptHandle": message.receipt,
            "MD5OfBody": _md5(message.body),
            "Body": message.body,
        }
        every = {
            "SenderId": ACCOUNT,
            "SentTimestamp": str(message.sent_ms),
            "ApproximateReceiveCount": str(message.receive_count),
            "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
        }
        if message.group_id is not None:
            every["MessageGroupId"] = message.group_id
        if message.trace_header is not None:
            every["AWSTraceHeader"] = message.trace_header
        chosen = every if "All" in names else {k: v for k, v in every.items() if k in names}
        if chosen:
            shaped["Attributes"] = chosen
        return shaped

    def _received(self, queue: _Queue, receipt: str) -> _Message | None:
        """The message a receipt handle names, if that handle is still its latest."""
        found = self._receipts.get(receipt)
        if found is None:
            try:
                decoded = base64.b64decode(receipt, validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                decoded = ""
            if len(decoded.split(" ")) != 3:
                raise ApiError(
                    "ReceiptHandleIsInvalid",
                    f'The input receipt handle "{receipt}" is not a valid receipt handle.',
                    query_code="ReceiptHandleIsInvalid",
                )
            return None
        message = queue.messages.get(found[1])
        if found[0] != queue.name or message is None or message.receipt != receipt:
            return None
        return message

    def _delete(self, queue: _Queue, receipt: str) -> None:
        message = self._received(queue, receipt)
        # A stale handle (the message received again since) succeeds and deletes nothing.
        if message is not None:
            del queue.messages[message.id]
        self._receipts.pop(receipt, None)

    def _change(self, queue: _Queue, receipt: str, seconds: int) -> None:
        if not 0 <= seconds <= SQS_MAX_VISIBILITY_SECONDS:
            raise self._invalid(f"Value {seconds} for parameter VisibilityTimeout is invalid.")
        message = self._received(queue, receipt)
        if message is None:
            raise self._invalid(
                f"Value {receipt} for parameter ReceiptHandle is invalid. Reason: Message does "
                "not exist or is not available for visibility timeout change."
            )
        now = time.time()
        if message.visible_at <= now:
            raise ApiError(
                "MessageNotInflight",
                "The message referred to isn't in flight.",
                query_code="AWS.SimpleQueueService.MessageNotInflight",
            )
        message.visible_at = now + seconds
        heapq.heappush(queue.due, (message.visible_at, next(self._order), message.id))
        self._lock.notify_all()

    def op_DeleteMessage(self, request: dict[str, Any]) -> dict[str, Any]:
        self._delete(self._queue(request), request["ReceiptHandle"])
        return {}

    def op_ChangeMessageVisibility(self, request: dict[str, Any]) -> dict[str, Any]:
        self._change(
            self._queue(request), request["ReceiptHandle"], int(request["VisibilityTimeout"])
        )
        return {}

    def _each(
        self,
        request: dict[str, Any],
        act: Callable[[_Queue, dict[str, Any]], dict[str, str] | None],
    ) -> dict[str, Any]:
        """A batch call: each entry succeeds or fails on its own, as SQS reports it."""
        queue = self._queue(request)
        entries = request.get("Entries") or []
        self._batch(entries)
        done, failed = [], []
        for entry in entries:
            try:
                done.append({"Id": entry["Id"], **(act(queue, entry) or {})})
            except ApiError as exc:
                failed.append(
                    {
                        "Id": entry["Id"],
                        "SenderFault": True,
                        "Code": exc.code,
                        "Message": exc.message,
                    }
                )
        return {"Successful": done, "Failed": failed}

    def op_DeleteMessageBatch(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._each(request, lambda q, e: self._delete(q, e["ReceiptHandle"]))

    def op_ChangeMessageVisibilityBatch(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._each(
            request, lambda q, e: self._change(q, e["ReceiptHandle"], int(e["VisibilityTimeout"]))
        )


# --- HTTP ----------------------------------------------------------------------------------


class LiteAwsServer(ThreadingHTTPServer):
    daemon_threads = True
    #: Many pooled keep-alive connections: every consumer process holds its own.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.sqs = Sqs(lambda: f"http://{address[0]}:{self.server_address[1]}")
        self.dynamodb = DynamoDb()
        self.requests: Counter[str] = Counter()
        self.requests_lock = threading.Lock()
        self.request_ids = _RequestIds()


class _RequestIds:
    """The `x-amzn-RequestId` of each answer: UUID-shaped, unique within the server (a random
    prefix per server, then a count). Reading 16 bytes from the OS per answer, as `uuid4`
    does, cost more than the rest of the answer's headers together."""

    def __init__(self) -> None:
        prefix = uuid.uuid4().hex
        self._prefix = f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-{prefix[16:20]}-"
        self._count = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count) & 0xFFFFFFFFFFFF:012x}"


class _Handler(FieldsHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pool expects
    #: TCP_NODELAY: without it a small answer waits for the client's delayed ACK (measured:
    #: about a fifth of a consumer thread's time went to waiting on DynamoDB calls here).
    disable_nagle_algorithm = True
    server: LiteAwsServer
    #: The Date header's text and the second it was formatted for (shared by every handler).
    _date: tuple[int, str] = (0, "")

    def log_message(self, format: str, *args: Any) -> None:
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header, formatted at most once a second (it has a resolution of one)."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        second, text = _Handler._date
        now = int(time.time())
        if now != second:
            text = super().date_time_string(now)
            _Handler._date = (now, text)
        return text

    def _answer(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        body = json.dumps(payload, default=float).encode()
        fields = [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("Content-Length", str(len(body))),
            ("x-amzn-RequestId", self.server.request_ids.next()),
            *headers.items(),
        ]
        self.write_answer(status, fields, body)

    def do_GET(self) -> None:
        if self.path != REQUESTS_PATH:
            self._answer(404, {}, {})
            return
        with self.server.requests_lock:
            counts = dict(self.server.requests)
        self._answer(200, {"requests": counts}, {})

    def do_POST(self) -> None:
        fields = self.fields
        length = int(fields.get("content-length") or 0)
        raw = self.rfile.read(length)
        target = fields.get("x-amz-target", "")
        _, _, operation = target.partition(".")
        backend: Sqs | DynamoDb | None = None
        if target.startswith(SQS_TARGET):
            backend, name = self.server.sqs, "sqs"
        elif target.startswith(DYNAMODB_TARGET):
            backend, name = self.server.dynamodb, "dynamodb"
        if backend is None:
            self._answer(400, {"__type": "UnknownOperationException", "message": target}, {})
            return
        with self.server.requests_lock:
            self.server.requests[f"{name}:{operation}"] += 1
        try:
            request = json.loads(raw or b"{}")
            answer = backend.handle(operation, request)
            if operation == "BatchGetItem":  # billed per key read, not per request
                keys = sum(len(spec["Keys"]) for spec in request["RequestItems"].values())
                with self.server.requests_lock:
                    self.server.requests[f"{name}:{operation}{KEYS_READ}"] += keys
            self._answer(200, answer, {})
        except ApiError as exc:
            if exc.code == "ConditionalCheckFailedException":  # billed as a write all the same
                with self.server.requests_lock:
                    self.server.requests[f"{name}:{operation}{FAILED_CONDITION}"] += 1
            self._error(name, exc)
        except (KeyError, TypeError, ValueError) as exc:
            self._error(name, _validation(f"malformed request: {type(exc).__name__} {exc}"))

    def _error(self, service: str, exc: ApiError) -> None:
        prefix = "com.amazonaws.sqs#" if service == "sqs" else "com.amazonaws.dynamodb.v20120810#"
        payload: dict[str, Any] = {"__type": prefix + exc.code, "message": exc.message}
        if exc.item is not None:
            payload["Item"] = exc.item
        headers = {}
        if exc.query_code is not None:
            headers["x-amzn-query-error"] = f"{exc.query_code};Sender"
        self._answer(400, payload, headers)


@contextlib.contextmanager
def serve(host: str = "127.0.0.1", port: int = 0) -> Iterator[LiteAwsServer]:
    """A server on a thread of this process (tests); the benchmark runs it as its own process."""
    server = LiteAwsServer((host, port))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sweeper_local.lite_aws")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args(argv)
    server = LiteAwsServer((args.host, args.port))
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
