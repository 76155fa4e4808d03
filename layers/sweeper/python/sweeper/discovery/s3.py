"""The s3 source: objects under a bucket and prefix, old enough for the policy's age rule.

ListObjectsV2 returns keys in UTF-8 binary order, and a key is unique, so `StartAfter` = the
last key committed resumes a pass exactly: nothing skipped, nothing read twice. The cursor is
that key, not the continuation token, because it means the same thing in every later run.

Tenant and object ids come from the key through `key_template` (`exports/{tenant_id}/{object_id}`);
a key that does not match is rejected by position. An object is due `min_age_seconds` after its
LastModified time; one due after now + `lookahead_seconds` is counted as not due and found again
by a later pass.

For very large buckets, S3 Inventory feeds the same path: its daily manifest lists CSV or
Parquet files of (key, last modified, ...) in key order; an inventory source reads them as pages
with the cursor (file index, row), and the same check and upsert follow (docs/decisions.md).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.config import S3Discovery
from sweeper.discovery.rows import Cursor, Page, Rejected, SourceRow
from sweeper.errors import DiscoverySourceError

#: ListObjectsV2 returns at most this many keys a call.
S3_MAX_KEYS = 1000


def key_pattern(template: str) -> re.Pattern[str]:
    """The template as an anchored pattern: each field one or more characters other than "/"."""
    parts = re.split(r"{(tenant_id|object_id)}", template)
    pattern = "".join(
        f"(?P<{part}>[^/]+)" if index % 2 else re.escape(part) for index, part in enumerate(parts)
    )
    return re.compile(f"^{pattern}$")


class ListsObjects(Protocol):
    """The S3 call discovery makes (a boto3 S3 client has it)."""

    def list_objects_v2(self, **kwargs: Any) -> Any: ...


@runtime_checkable
class HeadsObjects(Protocol):
    """HeadObject, for a due object's metadata when the policy names `metadata_params`."""

    def head_object(self, **kwargs: Any) -> Any: ...


class S3Source:
    """Pages of ListObjectsV2 under the configured prefix, resumed by StartAfter."""

    kind = "s3"

    def __init__(self, config: S3Discovery, client: ListsObjects) -> None:
        self._config = config
        self._client = client
        self._pattern = key_pattern(config.key_template)
        if config.metadata_params and not isinstance(client, HeadsObjects):
            raise TypeError("metadata_params need a client with head_object")

    def pass_rejects(self, now: datetime) -> list[Rejected]:
        return []  # every key has its place in the order

    def read_page(self, cursor: Cursor | None, limit: int, now: datetime) -> Page:
        rows: list[SourceRow] = []
        rejected: list[tuple[int, str]] = []
        not_due = 0
        last_key: str | None = None if cursor is None else str(cursor["start_after"])
        truncated = True
        latest_due = now + timedelta(seconds=self._config.lookahead_seconds)
        age = timedelta(seconds=self._config.min_age_seconds)
        seen = 0
        while seen < limit and truncated:
            response = self._list(last_key, min(limit - seen, S3_MAX_KEYS))
            truncated = bool(response.get("IsTruncated"))
            contents = response.get("Contents", [])
            if not contents:
                truncated = False
            for item in contents:
                seen += 1
                last_key = item["Key"]
                match = self._pattern.match(last_key)
                if match is None:
                    rejected.append((seen, "key does not match key_template"))
                    continue
                due = item["LastModified"] + age
                if due > latest_due:
                    not_due += 1
                    continue
                params = None
                if self._config.metadata_params:
                    params = self._metadata_params(last_key)
                    if params is None:
                        continue  # deleted since the listing: nothing left to clean up
                rows.append(SourceRow(seen, match["tenant_id"], match["object_id"], due, params))
        next_cursor = cursor if last_key is None else {"start_after": last_key}
        return Page(rows, next_cursor, not truncated, seen, not_due, tuple(rejected))

    def _metadata_params(self, key: str) -> dict[str, str] | None:
        """The object's user metadata that the policy names, as params; None when it is gone."""
        assert isinstance(self._client, HeadsObjects)  # checked when the source was built
        try:
            response = self._client.head_object(Bucket=self._config.bucket, Key=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "unknown")
            if code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise DiscoverySourceError("s3", f"HeadObject failed ({code})") from exc
        except BotoCoreError as exc:
            raise DiscoverySourceError("s3", f"HeadObject failed ({type(exc).__name__})") from exc
        metadata = response.get("Metadata", {})
        return {name: metadata[name] for name in self._config.metadata_params if name in metadata}

    def _list(self, start_after: str | None, max_keys: int) -> Any:
        request: dict[str, Any] = {
            "Bucket": self._config.bucket,
            "Prefix": self._config.prefix,
            "MaxKeys": max_keys,
        }
        if start_after is not None:
            request["StartAfter"] = start_after
        try:
            return self._client.list_objects_v2(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "unknown")
            raise DiscoverySourceError("s3", f"ListObjectsV2 failed ({code})") from exc
        except BotoCoreError as exc:
            raise DiscoverySourceError(
                "s3", f"ListObjectsV2 failed ({type(exc).__name__})"
            ) from exc
