"""Regenerates sluice_client/_generated/ from the wire contract with grpcio-tools.

    python3 clients/python/generate.py            # rewrite the generated modules
    python3 clients/python/generate.py --check    # exit 1 if they differ from quota.proto's output

The generated modules are committed so that `pip install clients/python` needs no grpcio-tools;
tests/test_generated.py runs the check, so they cannot drift from quota.proto.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "packages" / "protocol" / "proto"
PROTO = "sluice/throttler/v1/quota.proto"
TARGET = HERE / "sluice_client" / "_generated"
MODULES = ("quota_pb2.py", "quota_pb2.pyi", "quota_pb2_grpc.py")


def generate(into: pathlib.Path) -> dict[str, str]:
    from grpc_tools import protoc  # imported here: only this script needs grpcio-tools

    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"--python_out={into}",
            f"--pyi_out={into}",
            f"--grpc_python_out={into}",
            str(PROTO_ROOT / PROTO),
        ]
    )
    if status != 0:
        raise SystemExit(f"grpc_tools.protoc failed on {PROTO_ROOT / PROTO} (exit {status})")
    out_dir = into / pathlib.Path(PROTO).parent
    files = {name: (out_dir / name).read_text() for name in MODULES}
    # protoc writes an absolute import (`from sluice.throttler.v1 import quota_pb2`) that only works
    # with the proto root on sys.path; inside the package it is a sibling module.
    files["quota_pb2_grpc.py"] = re.sub(
        r"^from sluice\.throttler\.v1 import quota_pb2 as", "from . import quota_pb2 as", files["quota_pb2_grpc.py"], flags=re.M
    )
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(pathlib.Path(tmp))
    if args.check:
        stale = [name for name, text in files.items() if not (TARGET / name).exists() or (TARGET / name).read_text() != text]
        if stale:
            print(f"{', '.join(stale)} in {TARGET} differ from what {PROTO} generates: run python3 {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (TARGET / name).write_text(text)
    print(f"wrote {', '.join(MODULES)} into {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
