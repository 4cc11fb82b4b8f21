"""Fakes for tests: scenario builders and sources that need no GPU, driver or job."""
