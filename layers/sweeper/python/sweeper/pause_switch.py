"""The consumer's SQS event source mappings on AWS: what `sweeper pause` disables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import OperatorError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class EventSourceSwitch:
    """Enable or disable every event source mapping of one function (messages stay queued)."""

    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self._client = client
        self.function_name = function_name

    def mapping_ids(self) -> list[str]:
        ids: list[str] = []
        try:
            pages = self._client.get_paginator("list_event_source_mappings").paginate(
                FunctionName=self.function_name
            )
            for page in pages:
                ids.extend(m["UUID"] for m in page.get("EventSourceMappings", []) if "UUID" in m)
        except (ClientError, BotoCoreError) as exc:
            raise OperatorError(
                f"cannot list the event source mappings of {self.function_name}: "
                f"{type(exc).__name__}"
            ) from exc
        return ids

    def set_enabled(self, enabled: bool) -> list[str]:
        """Enable or disable each mapping; the ids changed. No mapping at all is an error."""
        ids = self.mapping_ids()
        if not ids:
            raise OperatorError(f"{self.function_name} has no event source mapping")
        for uuid in ids:
            try:
                self._client.update_event_source_mapping(UUID=uuid, Enabled=enabled)
            except (ClientError, BotoCoreError) as exc:
                raise OperatorError(
                    f"cannot {'enable' if enabled else 'disable'} event source mapping {uuid}: "
                    f"{type(exc).__name__}"
                ) from exc
        return ids
