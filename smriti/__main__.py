"""``python -m smriti``: the same as the ``smriti`` console script."""

from smriti.cli import main

raise SystemExit(main())
