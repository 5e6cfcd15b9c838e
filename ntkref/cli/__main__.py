"""``python -m ntkref.cli``: the ``ntkref`` command (the console script is ``ntkref.cli:main``)."""
import sys

from . import main

if __name__ == "__main__":  # importing it (pytest's doctest collection, pydoc) runs nothing
    sys.exit(main())
