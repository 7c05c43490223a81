"""The docs site's reference pages, written from the code they describe so that they cannot drift:
every config key from the workflow's schema (``config_keys``) and every ``nnunet-core`` command's
flags from its parser (``command_flags``). The mkdocs hooks (``site_hooks``) call them at build
time; nothing else of the package imports this one."""
