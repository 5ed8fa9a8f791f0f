#!/usr/bin/env python3
"""Round trip of tools/wheels/xz_wheel.py (ci/plugins.sh): a small wheel packed into one xz stream and unpacked
again installs with pip and imports with its files' bytes unchanged, and a truncated archive is refused rather
than unpacked into a partial wheel. Prints 'round trip ok' and exits 0, or names what differed and exits 1."""
import os
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xz_wheel  # noqa: E402

FILES = {
    "xzdemo/__init__.py": "VALUE = 'payload ' * 1000\n",
    "xzdemo/data/table.txt": "".join(f"{i} {i * i}\n" for i in range(2000)),
    "xzdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: xzdemo\nVersion: 1.0\n",
    "xzdemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: xz_wheel_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "xzdemo-1.0.dist-info/RECORD": "",
}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        wheel = os.path.join(tmp, "xzdemo-1.0-py3-none-any.whl")
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in FILES.items():
                z.writestr(name, text)
        archive = wheel + ".tar.xz"
        xz_wheel.pack(wheel, archive)
        back = os.path.join(tmp, "back", os.path.basename(wheel))
        os.makedirs(os.path.dirname(back))
        xz_wheel.unpack(archive, back)
        site = os.path.join(tmp, "site")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", site, back],
                       check=True)
        for name, text in FILES.items():
            if "dist-info" in name:
                continue
            with open(os.path.join(site, name)) as f:
                if f.read() != text:
                    sys.exit(f"{name}: installed bytes differ from the original wheel's")
        out = subprocess.run([sys.executable, "-c", "import xzdemo; print(len(xzdemo.VALUE))"], env={"PYTHONPATH": site},
                             capture_output=True, text=True, check=True).stdout.strip()
        if out != str(len("payload " * 1000)):
            sys.exit(f"import gave {out!r}")
        with open(archive, "rb") as f:
            data = f.read()
        truncated = archive + ".cut.tar.xz"
        with open(truncated, "wb") as f:
            f.write(data[: len(data) // 2])
        try:
            xz_wheel.unpack(truncated, os.path.join(tmp, "cut.whl"))
        except Exception as e:  # tarfile.ReadError, EOFError or lzma.LZMAError, depending on where the cut falls
            print(f"truncated archive refused: {type(e).__name__}")
        else:
            sys.exit("a truncated archive was unpacked without an error")
    print("round trip ok")


if __name__ == "__main__":
    main()
