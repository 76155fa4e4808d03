"""`python -m sweeper_cli`: the same command line as the `sweeper` script."""

from sweeper_cli import main

main()
