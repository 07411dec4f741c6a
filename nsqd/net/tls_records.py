"""The TLS record headers a client sends during the handshake, read as Go's crypto/tls reads
them, so that a failed upgrade is answered with nsqd's words (E_IDENTIFY_FAILED "IDENTIFY
failed tls: first record does not look like a TLS handshake") instead of OpenSSL's, and an
SSLv2 hello is refused at once instead of waiting for bytes that never come.

Sans-IO: fed the bytes the TLS layer reads, it only watches; OpenSSL still does the handshake."""

from __future__ import annotations

_HEADER = 5
_HANDSHAKE, _ALERT = 0x16, 0x15
_MAX_CIPHERTEXT = 16384 + 2048  # Go's maxCiphertext (before a version is agreed)

# Go's alert texts (crypto/tls/alert.go) by alert number, and by OpenSSL's reason name for a
# received alert (SSLV3_ALERT_*, TLSV1_ALERT_*, TLSV13_ALERT_*) with its prefix taken off
_ALERTS = {
    0: ("close notify", "CLOSE_NOTIFY"),
    10: ("unexpected message", "UNEXPECTED_MESSAGE"),
    20: ("bad record MAC", "BAD_RECORD_MAC"),
    21: ("decryption failed", "DECRYPTION_FAILED"),
    22: ("record overflow", "RECORD_OVERFLOW"),
    30: ("decompression failure", "DECOMPRESSION_FAILURE"),
    40: ("handshake failure", "HANDSHAKE_FAILURE"),
    42: ("bad certificate", "BAD_CERTIFICATE"),
    43: ("unsupported certificate", "UNSUPPORTED_CERTIFICATE"),
    44: ("revoked certificate", "CERTIFICATE_REVOKED"),
    45: ("expired certificate", "CERTIFICATE_EXPIRED"),
    46: ("unknown certificate", "CERTIFICATE_UNKNOWN"),
    47: ("illegal parameter", "ILLEGAL_PARAMETER"),
    48: ("unknown certificate authority", "UNKNOWN_CA"),
    49: ("access denied", "ACCESS_DENIED"),
    50: ("error decoding message", "DECODE_ERROR"),
    51: ("error decrypting message", "DECRYPT_ERROR"),
    70: ("protocol version not supported", "PROTOCOL_VERSION"),
    71: ("insufficient security level", "INSUFFICIENT_SECURITY"),
    80: ("internal error", "INTERNAL_ERROR"),
    86: ("inappropriate fallback", "INAPPROPRIATE_FALLBACK"),
    90: ("user canceled", "USER_CANCELLED"),
    100: ("no renegotiation", "NO_RENEGOTIATION"),
    109: ("missing extension", "MISSING_EXTENSION"),
    110: ("unsupported extension", "UNSUPPORTED_EXTENSION"),
    112: ("unrecognized name", "UNRECOGNIZED_NAME"),
    116: ("certificate required", "CERTIFICATE_REQUIRED"),
    120: ("no application protocol", "NO_APPLICATION_PROTOCOL"),
}
_BY_REASON = {reason: text for text, reason in _ALERTS.values()}
_ALERT_PREFIXES = ("SSLV3_ALERT_", "TLSV13_ALERT_", "TLSV1_ALERT_", "TLSV1_")


# OpenSSL's verify codes for a chain that leads to no trusted root (self-signed leaf,
# self-signed in chain, unable to get the local issuer): Go's "unknown authority"
_UNKNOWN_AUTHORITY = frozenset({18, 19, 20})


def go_words(reason: str | None, verify_code: int | None = None) -> str | None:
    """Go's words for an OpenSSL handshake error (its reason name, and the certificate
    verification code), when they are known; None for others."""
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "tls: client didn't provide a certificate"
    if reason == "CERTIFICATE_VERIFY_FAILED" and verify_code in _UNKNOWN_AUTHORITY:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    for prefix in _ALERT_PREFIXES:  # an alert the client sent
        if reason and reason.startswith(prefix):
            text = _BY_REASON.get(reason[len(prefix) :])
            return f"remote error: tls: {text}" if text else None
    return None


class HandshakeRecords:
    """Where a client's handshake bytes stand against Go's record-header checks."""

    __slots__ = ("_alert", "_fatal", "_header", "_left", "_records", "error")

    def __init__(self) -> None:
        self._header = b""  # a record header cut by a read
        self._left = 0  # bytes of the current record's body still to come
        self._records = 0
        self._alert = False  # the current record is a (plaintext) alert
        self._fatal = False  # ...of level fatal (Go drops warnings)
        self.error: str | None = None  # Go's refusal of a header seen so far

    def feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end and self.error is None:
            if self._left:
                step = min(self._left, end - pos)
                if self._alert:  # a byte at a time: the level, then the description
                    step = 1
                    if self._left == 2:
                        self._fatal = data[pos] == 2
                    elif self._fatal:
                        self.error = _alert_text(data[pos])
                self._left -= step
                pos += step
                continue
            take = _HEADER - len(self._header)
            self._header += data[pos : pos + take]
            pos += take
            if len(self._header) == _HEADER:
                self._check(self._header)
                self._header = b""

    def _check(self, header: bytes) -> None:
        kind, version = header[0], int.from_bytes(header[1:3], "big")
        length = int.from_bytes(header[3:5], "big")
        first = self._records == 0
        self._records += 1
        self._left = length
        self._alert = kind == _ALERT and length == 2
        # the order of Go's readRecordOrCCS
        if kind == 0x80:
            self.error = "tls: unsupported SSLv2 handshake received"
        elif first and (kind not in (_HANDSHAKE, _ALERT) or version >= 0x1000):
            self.error = "tls: first record does not look like a TLS handshake"
        elif length > _MAX_CIPHERTEXT:
            self.error = f"tls: oversized record received with length {length}"

    @property
    def eof_error(self) -> str:
        """Go's error for an end of stream here: between records or inside one."""
        return "unexpected EOF" if self._header or self._left else "EOF"


def _alert_text(number: int) -> str:
    text = _ALERTS.get(number, (f"alert({number})", ""))[0]
    return f"remote error: tls: {text}"
