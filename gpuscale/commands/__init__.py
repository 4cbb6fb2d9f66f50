"""One module per CLI command: ``register(subparsers)`` adds its parser and sets
``func``; heavy imports (TensorFlow, Textual) happen only inside the command."""
