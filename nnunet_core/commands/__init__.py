"""One module per ``nnunet-core`` command: ``configure_parser(parser)`` and ``run(args) -> int``."""
