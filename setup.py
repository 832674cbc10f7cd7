"""Ships the data parity needs inside its wheel (everything else is in pyproject.toml).

envs.toml, locks/, fixtures/, contracts/ and releases.json (the published sweep, whose lines
`--build` builds from) live at the root of the checkout, where the README's
commands name them. A wheel carries them inside the package, as `parity/_shipped/` with the
same layout (the bundled locks point into ../fixtures/), so an installed parity finds them
(parity/home.py). An editable install runs from the checkout and needs no copy.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("envs.toml", "locks", "fixtures", "contracts", "releases.json")


class BuildPyWithShippedData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        out = Path(self.build_lib) / "parity" / "_shipped"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for name in SHIPPED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, out / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, out / name)


setup(cmdclass={"build_py": BuildPyWithShippedData})
