"""The ``zeroplan`` console script of the wheel: the C++ program's main(), run in this process."""

import sys

from . import _core


def main() -> int:
    return _core.main(["zeroplan"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
