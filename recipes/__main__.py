"""Entry point of the zipapp shipped to workers: `python3 perffarm-recipes.pyz COMMAND ...`."""

import sys

from recipes.runner import main

sys.exit(main())
