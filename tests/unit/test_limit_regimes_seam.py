"""Outside the admission package, no code asks which kind a limit is.

The producer's claim bounds, `status`, the console, `sweeper plan` and the CDK app's IAM patterns
read a limit through its regime (`sweeper.admission.regimes.regime_of`, and its planning
provider, `sweeper_tools.planning.regimes.planning_of`); only the regimes' modules (in the layer
and with the operator tools) and the config read a limit's regime fields. Every module is
parsed, not imported. A regime field is any field of `LimitConfig` beyond its name and key
(`regimes`, `learn`), any field of a regime's config arm
(`rate`, `cost_per_call`, `max_in_flight`, `budget`: each arm of the union
`sweeper.config.limit.RegimeArm`, so a new regime's fields are watched as soon as its arm is in
the union), and any view or accessor `LimitConfig` gives of them (`call_rate`, `arm`), so that
none is a way around. Read as a limit's are:

- `X.FIELD is None` / `is not None`: the question "which kind is it?";
- `X.FIELD.anything`: reading into a regime's config (`limit.rate.limit`);
- `X.FIELD` where X names a limit (`limit`, `first`, `policy.limits[0]`). `policy.max_in_flight`
  is the policy's claim size, not a limit's field;
- `D["FIELD"]` / `D.get("FIELD")`: the plan's figures of a regime, read by a renderer;
- an arm's class named at all (`RateArm`, `Arm`, `RegimeArm`): a regime asked by its config.

Nor does planning code compare with a regime's name in a plan (`PlanTerm.bound`: "rate",
"in flight", its constant `RATE_BINDS`): asked "does it bind by its rate?", a regime's own
provider answers (`RegimePlanning.look_reads`), so a new regime touches no caller.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import sweeper
import sweeper_cli
import sweeper_tools
import sweeper_tools.planning.regimes as planning_regimes
from sweeper.config import LimitConfig
from sweeper.config.limit import ARMS
from sweeper_tools.planning.regimes import PLANNING

PACKAGE_DIR = Path(sweeper.__file__).resolve().parent
#: The regimes' own modules and the config that declares their fields may read them: in the
#: layer, and each regime's planning provider with the operator tools.
OWNERS = ("sweeper/admission/", "sweeper/config/", "sweeper_tools/planning/regimes/")
#: Code that names a regime's fields still, each with why; a new entry needs a reason.
KNOWN: dict[str, str] = {}
#: What every limit has, whatever its regimes: its name, key and the key's rendering.
COMMON = frozenset({"name", "key", "uses_params", "render", "limiter_key", "model_config"})
#: The limit's own fields, its arms' fields, and the views and accessors it defines of them.
FIELDS = (
    frozenset(LimitConfig.model_fields)
    | {field for arm in ARMS for field in arm.model_fields if field != "regime"}
    | {name for name in vars(LimitConfig) if not name.startswith("_")}
) - COMMON
#: The arms' classes, and the union of them: named only where a regime is owned.
ARM_NAMES = frozenset({"Arm", "RegimeArm", *(arm.__name__ for arm in ARMS)})
#: Each regime's name in a plan (`PlanTerm.bound`), as its provider plans a limit of it.
BOUNDS = frozenset(kind.BINDS for kind in PLANNING.values())
#: The constants that hold them, in the regimes' planning modules (`RATE_BINDS`), and the
#: providers' own attribute.
BOUND_NAMES = frozenset(
    {"BINDS"}
    | {
        name
        for info in pkgutil.iter_modules(planning_regimes.__path__)
        for name, value in vars(
            importlib.import_module(f"{planning_regimes.__name__}.{info.name}")
        ).items()
        if name.isupper() and isinstance(value, str) and value in BOUNDS
    }
)


def _limit_like(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return "limit" in text or text == "first"


def _asks(node: ast.AST) -> bool:
    if isinstance(node, ast.Name | ast.alias):
        return (node.id if isinstance(node, ast.Name) else node.name) in ARM_NAMES
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute):
        is_none = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops)
        return is_none and node.left.attr in FIELDS
    if isinstance(node, ast.Attribute):
        inner = node.value
        into = isinstance(inner, ast.Attribute) and inner.attr in FIELDS
        return into or (node.attr in FIELDS and _limit_like(inner))
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in FIELDS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        first = node.args[0] if node.args else None
        named = isinstance(first, ast.Constant) and first.value in FIELDS
        return node.func.attr == "get" and named
    return False


def _names_a_bound(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in BOUNDS
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in BOUND_NAMES
    return False


def compares_a_bound(tree: ast.AST) -> list[str]:
    """The comparisons of `tree` with a regime's name in a plan (see the module docstring)."""
    return [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(
            _names_a_bound(part)
            for side in (node.left, *node.comparators)
            for part in ast.walk(side)
            if isinstance(part, ast.expr)
        )
    ]


def _planning_modules() -> list[tuple[str, Path]]:
    return [
        (relative, path)
        for relative, path in _modules()
        if relative.startswith(("sweeper_tools/", "sweeper_cli/"))
    ]


def asks_the_kind(tree: ast.AST) -> list[str]:
    """The expressions of `tree` that read a limit's regime fields (see the module docstring)."""
    return [ast.unparse(node) for node in ast.walk(tree) if _asks(node)]


def _modules() -> list[tuple[str, Path]]:
    tools = Path(sweeper_tools.__file__).resolve().parent
    roots = [
        (PACKAGE_DIR, "sweeper"),
        (tools / "planning", "sweeper_tools/planning"),
        (tools / "deploy", "sweeper_tools/deploy"),
        (Path(sweeper_cli.__file__).resolve().parent, "sweeper_cli"),
    ]
    found = []
    for root, name in roots:
        for path in sorted(root.rglob("*.py")):
            relative = f"{name}/{path.relative_to(root).as_posix()}"
            if relative.startswith(OWNERS):
                continue
            found.append((relative, path))
    return found


def test_no_product_or_planning_code_asks_which_kind_a_limit_is() -> None:
    # Given every module of the product, the planning and the operator CLI, but the regimes'
    asking = {
        relative: found
        for relative, path in _modules()
        if relative not in KNOWN
        and (found := asks_the_kind(ast.parse(path.read_text(), filename=str(path))))
    }
    # Then none reads a limit's regime fields: it asks the limit's regime
    assert asking == {}


def test_no_planning_code_compares_with_a_regimes_name_in_a_plan() -> None:
    # Given every module of the planning and the operator tools, but the regimes' providers
    comparing = {
        relative: found
        for relative, path in _planning_modules()
        if (found := compares_a_bound(ast.parse(path.read_text(), filename=str(path))))
    }
    # Then none compares with the name a regime binds by: it asks each limit's provider alike
    assert comparing == {}


def test_a_comparison_with_a_regimes_name_in_a_plan_is_seen() -> None:
    # Given each way of comparing with a regime's name in a plan, and comparisons that are not
    compares = [
        "rated = bound if binding_by == RATE_BINDS else None",
        "capped = by != CAP_BINDS",
        'if tightest.bound == "in flight": pass',
        "x = bound in (RATE_BINDS, CAP_BINDS)",
        "x = kind.BINDS == bound",
    ]
    fine = ["binding_by = RATE_BINDS", 'x = name == "quota"', "x = bound is None"]
    # Then every comparison is seen, and nothing else
    assert [text for text in compares if not compares_a_bound(ast.parse(text))] == []
    assert [text for text in fine if compares_a_bound(ast.parse(text))] == []


def test_each_known_exception_still_asks() -> None:
    # An entry of KNOWN that no longer reads a regime field is left over: take it out
    modules = dict(_modules())
    stale = [name for name in KNOWN if not asks_the_kind(ast.parse(modules[name].read_text()))]
    assert stale == []


def test_a_limits_kind_asked_in_any_of_the_ways_is_seen() -> None:
    # Given each way of asking a limit's kind, and reads that are not
    asks = [
        "limit.max_in_flight is not None",
        "x = limit.rate.limit",
        "rows = policy.limits[0].max_in_flight / latency",
        'flight = figures["max_in_flight"]',
        'rate = row.get("rate")',
        "x = limit.call_rate",
        "arm = first.arm(CapArm)",
        "from sweeper.config.regimes import RateArm",
        "xs = [arm.budget for arm in limit.regimes]",
        "x = limit.cost_per_call",
    ]
    fine = ["cap = policy.max_in_flight", "rate = last.rate", "x = limits['name']"]
    # Then every asking is seen, and nothing else
    assert [text for text in asks if not asks_the_kind(ast.parse(text))] == []
    assert [text for text in fine if asks_the_kind(ast.parse(text))] == []
