import pathlib
import subprocess
import sys

GENERATE = pathlib.Path(__file__).resolve().parent.parent / "generate.py"


def test_generated_modules_match_quota_proto():
    result = subprocess.run([sys.executable, str(GENERATE), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
