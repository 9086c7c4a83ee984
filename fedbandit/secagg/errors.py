"""The errors of secure aggregation: malformed messages, aborts, detected tampering."""

from __future__ import annotations

__all__ = ["SecAggError", "SecAggAbort", "SecAggIntegrityError"]


class SecAggError(ValueError):
    """A malformed message or a protocol violation."""


class SecAggAbort(SecAggError):
    """Fewer than ``threshold`` clients survived a round: the protocol stops without output."""


class SecAggIntegrityError(SecAggError):
    """A message failed verification: the protocol stops without output instead of returning a wrong sum.

    Raised for a share that does not match its dealer's commitment, shares that do not lie
    on one polynomial, a ciphertext or signature that does not verify, and survivor lists
    that differ between clients (the server equivocated).

    Attributes
    ----------
    party : int or str or None
        The client whose message failed (``"server"`` when only the server can be at fault,
        None when the caller did not say, e.g. :func:`~fedbandit.secagg.shamir.shamir_reconstruct`
        called directly).
    round : str or None
        The name of the round (:data:`~fedbandit.secagg.protocol.ROUND_NAMES`) in which the
        failing message was sent.
    """

    def __init__(self, message: str, *, party=None, round: str | None = None):
        self.party = party
        self.round = round
        self.detail = message
        who = "unknown party" if party is None else (party if isinstance(party, str) else f"client {party}")
        where = "" if round is None else f" in round {round}"
        super().__init__(f"SecAgg aborted: message from {who}{where} failed verification: {message}")
