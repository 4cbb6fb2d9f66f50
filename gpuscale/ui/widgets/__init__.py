"""The dashboard's components, one module per screen region."""
