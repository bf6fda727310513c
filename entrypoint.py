"""Container entrypoint: everything lives in ``container/``."""

import sys

from container.cli import main

if __name__ == "__main__":
    sys.exit(main())
