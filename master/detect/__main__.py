"""`python -m master.detect FILE.csv ...` runs the detect command."""

from __future__ import annotations

import sys

from master.detect.cli import main

sys.exit(main())
