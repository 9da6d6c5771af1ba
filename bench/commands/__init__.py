"""One module per subcommand group; each exposes `register(app)`. Logic lives elsewhere."""
