"""What several test files share (imported as tests.support.NAME)."""
