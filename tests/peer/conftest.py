"""The vendored SB3 tests run only through tests/peer/run.py (routed to seedpool), never
collected by the project's own suite, which would run them against SB3 itself."""

import os

collect_ignore_glob = [] if os.environ.get("SEEDPOOL_PEER_SUITE") else ["sb3/*"]
