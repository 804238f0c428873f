"""The console's views, one module per page family."""
