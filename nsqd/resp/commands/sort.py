"""SORT as Redis 7.0 runs it: the elements of a list, set or sorted set, ordered as numbers
(or ALPHA, as bytes), by themselves or by the keys a BY pattern names (`weight_*`,
`h_*->field`; a pattern without `*` keeps the stored order), cut by LIMIT, replaced by GET
patterns (`#`: the element), replied or STOREd as a list (which serves clients blocked on it).
SORT_RO is SORT without STORE."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cmp_to_key

from protocol.resp.codec import integer, raw_array

from ..keyspace import Keyspace, WrongType
from ..zset import ZSet
from .registry import SYNTAX, ReplyError, Session, command, float_arg, integer_arg
from .sets import member_order

NOT_DOUBLE = "ERR One or more scores can't be converted into double"


@dataclass
class Options:
    desc: bool = False
    alpha: bool = False
    limit: tuple[int, int] | None = None  # offset, count
    store: bytes | None = None
    by: bytes | None = None
    dontsort: bool = False  # BY a pattern without '*': the stored order
    gets: list[bytes] = field(default_factory=list)


def _options(argv: list[bytes], readonly: bool) -> Options:
    o = Options()
    j, argc = 2, len(argv)
    while j < argc:
        word, left = argv[j].lower(), argc - j - 1
        if word == b"asc":
            o.desc = False
        elif word == b"desc":
            o.desc = True
        elif word == b"alpha":
            o.alpha = True
        elif word == b"limit" and left >= 2:
            o.limit = (integer_arg(argv[j + 1]), integer_arg(argv[j + 2]))
            j += 2
        elif word == b"store" and left >= 1 and not readonly:
            o.store = argv[j + 1]
            j += 1
        elif word == b"by" and left >= 1:
            o.by = argv[j + 1]
            o.dontsort = b"*" not in o.by
            j += 1
        elif word == b"get" and left >= 1:
            o.gets.append(argv[j + 1])
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return o


def lookup(ks: Keyspace, pattern: bytes, subst: bytes) -> bytes | None:
    """lookupKeyByPattern: `#` is the element; the first `*` is replaced by it; `->field`
    reads a hash field; a key of another type (or none) reads as nothing."""
    if pattern == b"#":
        return subst
    star = pattern.find(b"*")
    if star < 0:
        return None
    arrow = pattern.find(b"->", star)
    fieldname = None
    if arrow >= 0 and arrow + 2 < len(pattern):
        fieldname, pattern = pattern[arrow + 2 :], pattern[:arrow]
    key = pattern[:star] + subst + pattern[star + 1 :]
    value = ks.get(key)
    if fieldname is None:
        return value if isinstance(value, bytes) else None
    return value.get(fieldname) if isinstance(value, dict) else None


def _elements(value: object) -> list[bytes]:
    if value is None:
        return []
    if isinstance(value, deque):
        return list(value)
    if isinstance(value, set):  # SMEMBERS's order: BY nosort keeps it (an intset ascends)
        return member_order(value)
    if isinstance(value, ZSet):
        return [member for _, member in value.order]
    raise WrongType


def _sorted(ks: Keyspace, elems: list[bytes], o: Options) -> list[bytes]:
    """Redis's sortCompare: numbers (ties by the element's bytes), or ALPHA bytes; by a
    pattern, a missing weight sorts first (ALPHA) or as 0."""
    if o.alpha:
        weights: list[object] = [lookup(ks, o.by, e) if o.by else e for e in elems]
    else:
        weights = []
        for e in elems:
            w = lookup(ks, o.by, e) if o.by else e
            weights.append(0.0 if w is None else float_arg(w, NOT_DOUBLE))

    def compare(a: tuple[bytes, object], b: tuple[bytes, object]) -> int:
        (ea, wa), (eb, wb) = a, b
        if o.alpha:
            if wa is None or wb is None:
                cmp = (wa is not None) - (wb is not None)
            else:
                cmp = (wa > wb) - (wa < wb)  # type: ignore[operator]
        else:
            cmp = (wa > wb) - (wa < wb) or (ea > eb) - (ea < eb)  # type: ignore[operator]
        return -cmp if o.desc else cmp

    pairs = sorted(zip(elems, weights, strict=True), key=cmp_to_key(compare))
    return [e for e, _ in pairs]


def _sort(s: Session, argv: list[bytes], readonly: bool) -> bytes:
    o = _options(argv, readonly)
    ks = s.ks
    value = ks.get(argv[1])
    if isinstance(value, set) and o.dontsort and o.store is not None:
        o.dontsort, o.alpha, o.by = False, True, None  # a set's order is random: sort it
    elems = _elements(value)
    if o.dontsort:
        if o.desc and isinstance(value, deque | ZSet):  # a set has no order to reverse
            elems.reverse()
    else:
        elems = _sorted(ks, elems, o)
    if o.limit is not None:
        offset, count = o.limit
        start = max(offset, 0)
        elems = elems[start:] if count < 0 else elems[start : start + count]
    if not o.gets:
        out: list[bytes | None] = list(elems)
    else:
        out = [lookup(ks, pattern, e) for e in elems for pattern in o.gets]
    if o.store is None:
        return raw_array([s.enc.bulk(x) for x in out])  # a missing GET is a null
    ks.delete([o.store])
    if out:
        ks.push(o.store, [b"" if x is None else x for x in out], left=False)
    return integer(len(out))


@command("sort", -2)
def sort(s: Session, argv: list[bytes]) -> bytes:
    return _sort(s, argv, False)


@command("sort_ro", -2)
def sort_ro(s: Session, argv: list[bytes]) -> bytes:
    return _sort(s, argv, True)
