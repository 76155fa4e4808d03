"""A secret per tenant: an action's `secret_arn` written as a template over the job's tenant.

`arn:aws:secretsmanager:REGION:ACCOUNT:secret:sweeper/shopify/{tenant_id}` names one secret per
tenant (a store's access token, an account's login). Checked when the policy is read
(`check_secret_arn`, a ValueError naming the rule):

- the template is a complete Secrets Manager ARN up to the secret's name, and `{tenant_id}`
  (the only field, once) stands in the name's last part, after a fixed path of at least one
  part: the consumer is granted `GetSecretValue` on that path's secrets only
  (`sweeper/shopify/*`, `grant_resource`), never on the account's;
- the name's fixed text is Secrets Manager's name characters, and what follows the field does
  not end like the six random characters of a complete ARN (`-AbCdEf`).

Filled per job (`SecretTemplate.arn_for`): the tenant id must be a safe name fragment (1 to
`MAX_TENANT_FRAGMENT_CHARS` of `A-Za-z0-9_+=.@-`, so never `/`, `*` or `?`), and the filled
name must not end like a complete ARN's random suffix (Secrets Manager would read it as one
and find another secret, or none); otherwise None, and the job is refused without a call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from sweeper.actions.templates import PLACEHOLDER_RE, TENANT_FIELD

#: A tenant id fills at most this much of a secret's name.
MAX_TENANT_FRAGMENT_CHARS: Final = 128
#: Secrets Manager's limit on a secret's name.
MAX_SECRET_NAME_CHARS: Final = 512
_ARN_RE: Final = re.compile(
    r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:(?P<name>.*)", re.S
)
_NAME_TEXT_RE: Final = re.compile(r"[A-Za-z0-9/_+=.@-]*")
_TENANT_FRAGMENT_RE: Final = re.compile(rf"[A-Za-z0-9_+=.@-]{{1,{MAX_TENANT_FRAGMENT_CHARS}}}")
#: How a complete ARN ends: a hyphen and six random characters.
_RANDOM_SUFFIX_RE: Final = re.compile(r"-[A-Za-z0-9]{6}\Z")


def is_secret_template(arn: str) -> bool:
    """True when `arn` names a field (it is a template over the tenant)."""
    return "{" in arn or "}" in arn


@dataclass(frozen=True, slots=True)
class SecretTemplate:
    """A checked template: the ARN's text before and after `{tenant_id}`."""

    before: str
    after: str

    def arn_for(self, tenant_id: str) -> str | None:
        """The tenant's secret's (partial) ARN, or None when the tenant id is not a safe
        fragment of a secret's name."""
        if not _TENANT_FRAGMENT_RE.fullmatch(tenant_id):
            return None
        arn = f"{self.before}{tenant_id}{self.after}"
        name = arn.split(":secret:", 1)[1]
        if len(name) > MAX_SECRET_NAME_CHARS or _RANDOM_SUFFIX_RE.search(name):
            return None
        return arn


def parse_secret_template(arn: str) -> SecretTemplate:
    """`arn` checked as a secret template (the module's rules); ValueError naming the rule."""
    match = _ARN_RE.fullmatch(arn)
    if match is None:
        raise ValueError(
            "a secret_arn with {tenant_id} must be a Secrets Manager ARN: "
            "arn:aws:secretsmanager:REGION:ACCOUNT:secret:path/{tenant_id}"
        )
    name = match["name"]
    fields = [f"{{{field}}}" for field in PLACEHOLDER_RE.findall(name)]
    rest = name.replace(TENANT_FIELD, "")
    if fields != [TENANT_FIELD] or "{" in rest or "}" in rest:
        raise ValueError("a secret_arn template may name {tenant_id} once, and no other field")
    path, _, last = name.rpartition("/")
    if TENANT_FIELD not in last or not path:
        raise ValueError(
            "a secret_arn's {tenant_id} must stand in the last part of the secret's name, "
            "after a fixed path (secret:sweeper/shopify/{tenant_id}): the consumer may read "
            "that path's secrets only"
        )
    before, _, after = name.partition(TENANT_FIELD)
    if not (_NAME_TEXT_RE.fullmatch(before) and _NAME_TEXT_RE.fullmatch(after)):
        raise ValueError("a secret's name holds only letters, digits and /_+=.@-")
    if _RANDOM_SUFFIX_RE.search(after):
        raise ValueError(
            "a secret_arn template may not end with a complete ARN's random suffix (-AbCdEf): "
            "each tenant's secret has its own"
        )
    prefix = arn[: match.start("name")]
    return SecretTemplate(prefix + before, after)


def check_secret_arn(arn: str) -> str:
    """`arn` as given, after checking it when it is a template; ValueError otherwise."""
    if is_secret_template(arn):
        parse_secret_template(arn)
    return arn
