"""Thin wrapper around the `pinnkit` command, for `srun python scripts/train.py ...`.

Same arguments as `pinnkit`: e.g. `python scripts/train.py train configs/poisson2d.yaml`.
"""

import sys

from pinnkit.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
