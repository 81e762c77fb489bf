"""urllib3's connections: `request` (its own, not `http.client`'s), the layer requests and
botocore (boto3's S3, SQS and SES calls) stand on; its answer is read by `http.client`'s
`getresponse`, watched there (`with_http_client`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from temporal_crashtest._worker.http.sending import sending
from temporal_crashtest._worker.http.with_http_client import pending, url_of


def install(module: ModuleType) -> None:
    cls = module.HTTPConnection
    request = cls.request

    def watched_request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        body = args[0] if args else kwargs.get("body")
        headers = args[1] if len(args) > 1 else kwargs.get("headers")
        with sending("urllib3", method, url_of(self, url), headers, body) as send:
            sent = request(self, method, url, *args, **kwargs)
            pending(self, send)
            return sent

    cls.request = watched_request
