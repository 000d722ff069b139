"""`python -m seedpool.bench`: the same as `seedpool bench`."""

import sys

from seedpool.bench import main

sys.exit(main())
