#!/usr/bin/env python3
"""Every relative link in the project's Markdown files points at a file or folder that exists (ctest
docs.links_resolve): docs move, and a link left behind is a claim that is no longer true."""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
files = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "*.md"], capture_output=True, text=True, check=True).stdout.split()
link = re.compile(r"\]\(([^)\s]+)\)")
broken = []
for name in files:
    text = (root / name).read_text(errors="replace")
    for target in link.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if path and not ((root / name).parent / path).exists():
            broken.append(f"{name}: {target}")
print("\n".join(broken) if broken else f"{len(files)} Markdown files, every relative link resolves")
sys.exit(1 if broken else 0)
