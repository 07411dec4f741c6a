import sys

from conformance.clients.runner import main

sys.exit(main())
