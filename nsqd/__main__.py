import gc
import sys

gc.disable()  # during the imports: cli.main() freezes their heap, then turns it back on

from .lazy import defer  # noqa: E402

defer()  # before trio is imported: OpenSSL loads only if TLS or AUTH is used

from .cli import main  # noqa: E402

sys.exit(main())
