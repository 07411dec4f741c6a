import sys

from .lazy import defer

defer()  # before trio is imported: OpenSSL loads only if TLS or AUTH is used

from .cli import main  # noqa: E402

sys.exit(main())
