"""--workers=N: every core behind one address. The launched process supervises N worker
processes (supervisor.py); each is a whole nsqd on the same ports (SO_REUSEPORT) with its own
partition under --data-path (identity.py), and pulls from its peers what its consumers have
credit for (worker.py, pull.py). Imported only when --workers is above 1."""
