"""A review as one thing: its questions, saved strategy, runs, screening, updates, and one file."""
