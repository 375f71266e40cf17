"""The `txnwatch` command: its subcommands (commands), the one-shot `txnwatch hanging`, the demo and terminal tables."""
