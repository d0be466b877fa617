"""Builds posenc's one compiled piece, the C extension ``posenc.core._kernels`` (the rest: pyproject.toml).

It needs only a C compiler and the Python headers (no NumPy headers: buffers come by the buffer protocol).
``optional=True``: where no compiler is found, posenc installs anyway and runs on its NumPy path
(``posenc.core.compiled_path()`` says which path is in use). No contraction into fused multiply-adds and no
fast-math: the exact-path kernels must perform the NumPy path's IEEE operations, in its order. (Angle
addition calls fma() explicitly, in a build for CPUs that have it: its certified bands allow it.)
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = {
    "unix": ["-O3", "-ffp-contract=off", "-fno-fast-math", "-std=c99"],
    "mingw32": ["-O3", "-ffp-contract=off", "-fno-fast-math", "-std=c99"],
    "msvc": ["/O2", "/fp:precise"],
}


class BuildExt(build_ext):
    def build_extensions(self) -> None:
        for extension in self.extensions:
            extension.extra_compile_args = FLAGS.get(self.compiler.compiler_type, [])
        super().build_extensions()


setup(
    ext_modules=[Extension("posenc.core._kernels", ["src/posenc/core/_kernels.c"], optional=True)],
    cmdclass={"build_ext": BuildExt},
)
