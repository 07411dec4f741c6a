"""When a pull link sends its peer a new RDY (nsqd/group/pull.py `wants_rdy`): every lower
credit at once, a higher one only past a quarter more, and always the first."""

from __future__ import annotations

import pytest

from nsqd.group.pull import wants_rdy


@pytest.mark.parametrize(
    ("want", "sent", "sends"),
    [
        (0, -1, True),  # the session's first RDY, even 0
        (5, -1, True),
        (0, 1, True),  # a consumer that stopped: the peer stops at once
        (357, 358, True),  # any lower credit: nothing pulled that no consumer could take
        (1, 0, True),  # from 0, any credit (one consumer's RDY 1 is exact)
        (2, 1, True),
        (8, 7, True),  # a step of 1 below 8
        (9, 8, False),
        (10, 8, True),
        (358, 357, False),  # a FIN's worth more: no RDY, no wake-up of the peer
        (446, 357, True),
        (445, 357, False),
        (7, 7, False),
        (0, 0, False),
    ],
)
def test_when_a_link_sends_rdy(want: int, sent: int, sends: bool) -> None:
    assert wants_rdy(want, sent) is sends


def test_credit_that_only_grows_back_sends_few_rdys() -> None:
    """A consumer's RDY 2500 over 7 peers, a message delivered and FIN'd at a time: the credit
    dips by one and grows back; the link sends the dip once and nothing after."""
    sent, count = -1, 0
    for credit in [2500, 2499, 2500] * 1000:
        want = -(-credit // 7)
        if wants_rdy(want, sent):
            sent, count = want, count + 1
    assert count == 2
    assert sent == 357
