import sys
from pathlib import Path

# tests/reference.py is imported as a plain module by the test files.
sys.path.insert(0, str(Path(__file__).parent))
