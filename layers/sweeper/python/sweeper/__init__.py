"""sweeper: scheduled cleanup obligations against a rate-limited API, none lost, none done twice."""

__version__ = "0.1.0"
