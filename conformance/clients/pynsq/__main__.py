import sys

from conformance.clients.pynsq.checks import main

sys.exit(main())
