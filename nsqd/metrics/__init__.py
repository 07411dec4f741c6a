"""What the daemon reports about itself: the /stats snapshot (snapshot.py), its text page
(render.py), the memory figures (memory.py) and the statsd pusher (statsd.py). A Prometheus
renderer belongs here beside render.py, over the same snapshot."""
