"""``python -m privclust`` is the ``privclust`` command."""

from .cli import main

main()
