"""``python -m ntkref.cli``: the ``ntkref`` command (the console script is ``ntkref.cli:main``)."""
import sys

from . import main

sys.exit(main())
