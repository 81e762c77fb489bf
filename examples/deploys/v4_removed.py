"""`Order`, version 4, the last stage of Temporal's versioning guide: once no run of v2_patched
is left, the deprecated patch is removed. Its code is v2's — the notice with no patch — which is
right after v3_deprecated (its markers are deprecated: replay passes over them) and wrong after
v2_patched (a run that recorded the patch is blocked: "Non-deprecated patch marker") or v1."""

from examples.deploys.v2 import Order, worker

__all__ = ["Order", "worker"]
