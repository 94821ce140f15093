"""The explomemo command: parse, call the library, print."""
