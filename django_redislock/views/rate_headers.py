"""The IETF rate-limit header fields on a limited view's responses, written to
draft-ietf-httpapi-ratelimit-headers-10 (September 2025; the field syntax is the same since
-08): ``RateLimit-Policy: "5/m";q=5;w=60`` says the policy (quota ``q`` per window ``w``
seconds), ``RateLimit: "5/m";r=0;t=30`` what is left of it (``r`` units, and ``t`` seconds
until more are available). Both are Structured Field lists of items, so stacked limits add
an item each. The policy's identifier is the decorator's ``group`` when it gave one, else
the rate as written (``"5/m"``)."""

from __future__ import annotations

import math
from typing import Any

from ..ratelimit.rate import Rate


def policy_id(group: str | None, rate: Rate) -> str:
    """An sf-string: printable ASCII, with ``"`` and ``\\`` escaped."""
    text = group if group is not None and group.isascii() else rate.text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def add_fields(response: Any, policy: str, rate: Rate, remaining: int, reset: float) -> None:
    """Add this limit's item to both fields (``reset``: seconds, rounded up as delay-seconds
    are); a hook's own response that set them keeps its values."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return  # not an HttpResponse: nothing to add to
    items = {
        "RateLimit-Policy": f"{policy};q={rate.count};w={rate.period_us // 1_000_000}",
        "RateLimit": f"{policy};r={max(remaining, 0)};t={max(math.ceil(reset), 0)}",
    }
    for field, item in items.items():
        present = headers.get(field)
        if present is None:
            headers[field] = item
        elif not any(part.split(";")[0].strip() == policy for part in present.split(",")):
            headers[field] = f"{present}, {item}"
