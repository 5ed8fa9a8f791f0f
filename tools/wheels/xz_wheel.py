#!/usr/bin/env python3
"""tools/wheels/xz_wheel.py pack WHEEL OUT.whl.tar.xz | unpack IN.whl.tar.xz OUT.whl — a wheel in a solid xz archive.

A wheel is a zip, compressed file by file; a wheel of sources and headers (FlashInfer's: 101 MB, 14,705 files for
its JIT) is several times smaller compressed as one stream. `pack` rewrites the wheel's members into a tar.xz, and
`unpack` writes them back into a wheel (stored, not compressed: it is only read once, by pip) that installs as the
original did. For an offline node that takes a limited size per visit (ci/gpu.sh unpacks FLASHCHECK_WHEEL_DIR's
*.whl.tar.xz before installing its wheels).
"""
import io
import sys
import tarfile
import zipfile


def pack(wheel, out):
    with zipfile.ZipFile(wheel) as z, tarfile.open(out, "w:xz", preset=6) as t:
        for info in z.infolist():
            if info.is_dir():
                continue
            data = z.read(info)
            member = tarfile.TarInfo(info.filename)
            member.size, member.mode = len(data), 0o644
            t.addfile(member, io.BytesIO(data))


def unpack(archive, out):
    with tarfile.open(archive, "r:xz") as t, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for member in t:
            if member.isfile():
                z.writestr(member.name, t.extractfile(member).read())


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__.splitlines()[0])
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
