"""What an error message claims, against the error's `proven` flag: the fuzzers' test of honesty.

A solver that gives up must not say it proved anything, and a proof must carry `proven=True`; the
fuzzers (`bench.fuzz`, its bank part `bench.fuzz_banks`) count a disagreement as a false proof.
"""

from __future__ import annotations

import re

_CLAIM = re.compile(r"\bprov(ed|en|es)\b", re.IGNORECASE)


def claims_proof(message: str) -> bool:
    """True if an error message says something was proved (and not that it was not)."""
    return bool(_CLAIM.search(message)) and "not proven" not in message.lower()


def honest(message: str, proven: bool) -> bool:
    """An `InfeasibleError`'s message and its `proven` agree: no proof claimed without the flag,
    no flag on a message that says "not proven"."""
    return "not proven" not in message.lower() if proven else not claims_proof(message)
