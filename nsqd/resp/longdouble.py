"""x87 long double arithmetic (64-bit mantissa, round half to even), exactly, with fractions:
what Redis's INCRBYFLOAT and HINCRBYFLOAT compute with strtold, `+` and `%.17Lf`, so that
their replies are Redis's digit for digit (10.5 + 0.1 is 10.6; 10.6 - 5 + 200 is
205.60000000000000001)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

MANTISSA_BITS = 64


def round_ld(x: Fraction) -> Fraction:
    """The long double nearest to x (ties to even)."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    shift = MANTISSA_BITS - 1 - e  # scale so the mantissa has 64 bits before the point
    scaled = x * (Fraction(2) ** shift)
    m = round(scaled)  # Fraction.__round__ rounds half to even
    return sign * Fraction(m) / (Fraction(2) ** shift)


def parse(text: str) -> Fraction:
    """strtold of a decimal (or C99 hex) float text already checked for its syntax."""
    if text.lstrip("+-")[:2].lower() == "0x":
        return round_ld(Fraction(float.fromhex(text)))
    return round_ld(Fraction(Decimal(text)))


def add(a: Fraction, b: Fraction) -> Fraction:
    return round_ld(a + b)


def human(x: Fraction) -> str:
    """ld2string(LD_STR_HUMAN): %.17Lf, then the trailing zeros and point dropped."""
    scaled = round(x * 10**17)  # printf rounds the exact binary value, half to even
    sign = "-" if scaled < 0 else ""
    digits = str(abs(scaled)).rjust(18, "0")
    text = f"{sign}{digits[:-17]}.{digits[-17:]}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text
