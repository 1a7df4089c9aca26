"""The subcommands of ``searchgym``, one module each.

Each module has ``add_parser(subparsers)``, which adds its parser and sets ``run`` (the function
that carries the command out and returns the exit status) as the parser's default.
"""
