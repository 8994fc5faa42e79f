"""Subcommands of `memsched`: each module defines register(subparsers)."""
