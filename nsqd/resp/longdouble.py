"""x87 long double arithmetic (64-bit mantissa, round half to even), exactly, with fractions:
what Redis's INCRBYFLOAT and HINCRBYFLOAT compute with strtold, `+` and `%.17Lf`, so that
their replies are Redis's digit for digit (10.5 + 0.1 is 10.6; 10.6 - 5 + 200 is
205.60000000000000001)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

MANTISSA_BITS = 64
MAX = Fraction((2**64 - 1) * 2 ** (16383 - 63))  # LDBL_MAX, ~1.19e4932
_MAX_SHIFT = 16445  # the smallest subnormal is 2**-16445: no finer step below 2**-16382


class OutOfRange(ArithmeticError):
    """strtold's ERANGE that Redis refuses: past LDBL_MAX (an infinity), or a value that is
    not zero read as zero; also a sum that overflows."""


def round_ld(x: Fraction) -> Fraction:
    """The long double nearest to x (ties to even, subnormals included); OutOfRange past
    LDBL_MAX."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    # scale so the mantissa has 64 bits before the point (fewer for a subnormal)
    shift = min(MANTISSA_BITS - 1 - e, _MAX_SHIFT)
    scaled = x * (Fraction(2) ** shift)
    m = round(scaled)  # Fraction.__round__ rounds half to even
    value = Fraction(m) / (Fraction(2) ** shift)
    if value > MAX:
        raise OutOfRange
    return sign * value


def parse(text: str) -> Fraction:
    """strtold of a decimal (or C99 hex) float text already checked for its syntax;
    OutOfRange where it overflows or underflows to zero."""
    if text.lstrip("+-")[:2].lower() == "0x":
        return _hex(text)
    d = Decimal(text)
    if d and d.adjusted() > 4933:  # overflows, whatever the digits: no exact look needed
        raise OutOfRange
    if d and d.adjusted() < -4952:
        # (under half the smallest subnormal, ~3.6e-4951): zero; and Fraction(Decimal) of
        # 1e-99999999 would take minutes, every client of the daemon waiting
        raise OutOfRange
    value = round_ld(Fraction(d))
    if d and value == 0:
        raise OutOfRange
    return value


def _hex(text: str) -> Fraction:
    """A C99 hex float, exactly (float.fromhex is a double's: 0x1p16000 is a long double,
    and it raised OverflowError, which closed the connection)."""
    sign = -1 if text[:1] == "-" else 1
    mantissa, _, exponent = text.lstrip("+-")[2:].lower().partition("p")
    whole, _, fraction = mantissa.partition(".")
    n = int(whole + fraction or "0", 16)
    if n == 0:
        return Fraction(0)
    if len(exponent.lstrip("+-").lstrip("0")) > 8:  # past any long double, either way
        raise OutOfRange
    e = int(exponent or "0") - 4 * len(fraction)
    if n.bit_length() + e > 16385 or n.bit_length() + e < -16446:
        raise OutOfRange  # an infinity, or under half the smallest subnormal: zero
    value = round_ld(Fraction(n) * Fraction(2) ** e)
    if value == 0:
        raise OutOfRange
    return sign * value


def add(a: Fraction, b: Fraction) -> Fraction:
    """a + b rounded; OutOfRange where it overflows (Redis: an infinity)."""
    return round_ld(a + b)


def human(x: Fraction) -> str:
    """ld2string(LD_STR_HUMAN): %.17Lf, then the trailing zeros and point dropped."""
    scaled = round(x * 10**17)  # printf rounds the exact binary value, half to even
    sign = "-" if scaled < 0 else ""
    # (through Decimal: str() of an int past 4,300 digits raises, and a long double's
    # %.17Lf reaches 4,950: INCRBYFLOAT k 1e4932 closed the connection)
    digits = format(Decimal(abs(scaled)), "f").rjust(18, "0")
    text = f"{sign}{digits[:-17]}.{digits[-17:]}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text
