"""Headless faces over the application layer (:mod:`kmds_desktop.app`): subcommands that drive the
same sessions as the window. They sit beside :mod:`kmds_desktop.cli` at the top of the layers."""
