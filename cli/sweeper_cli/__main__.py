"""`python -m sweeper.cli`: the same command line as the `sweeper` script."""

from sweeper.cli import main

main()
