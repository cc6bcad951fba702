"""`python -m juru` is the `juru` command."""

from juru.cli import main

main()
