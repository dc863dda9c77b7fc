"""Install musa as a Python package, offline, with Debian's setuptools:

    /usr/bin/python3 -m pip install --no-build-isolation .
    (or: /usr/bin/python3 setup.py bdist_wheel, then pip install the wheel)

The extension musa._C is built by the project's CMake (target musa_python,
linked statically with libmusa), so the installed package needs only the
system libraries (oneDNN, OpenBLAS, libgomp, protobuf-c; Open MPI for musa.distributed,
whose backend libmusa_mpi.so is installed next to the module).
"""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.join(ROOT, "build-python")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                               "-DMUSA_BUILD_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "musa_python", "-j", str(os.cpu_count() or 2)])
        built = os.path.join(ROOT, "python", "musa", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        # musa.distributed's MPI backend, next to the module (built when
        # Open MPI's libopenmpi-dev is installed; loaded only when used)
        shim = os.path.join(ROOT, "python", "musa", "libmusa_mpi.so")
        if os.path.exists(shim):
            shutil.copyfile(shim, os.path.join(os.path.dirname(dest), "libmusa_mpi.so"))


setup(
    name="musa",
    version="0.1.0",
    description="A deep learning framework with a C core: eager autograd, static graphs, a C runtime",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[CMakeExtension("musa._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
