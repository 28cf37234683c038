"""Exact live-byte counting of PyTorch's CPU allocator (see counting_allocator.cpp for why it is exact).

install() must run right after `import torch` and before any tensor is created: storages allocated
earlier are freed through the default allocator's deleter and are simply never counted.
"""
import ctypes
import hashlib
import os
import subprocess

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_lib = None


def _build():
    import torch
    src = os.path.join(_HERE, "counting_allocator.cpp")
    torch_dir = os.path.dirname(torch.__file__)
    key = hashlib.sha1((open(src).read() + torch.__version__).encode()).hexdigest()[:12]
    out_dir = os.environ.get("ZP_DS_BUILD", os.path.join(_REPO, "build-ds-harness"))  # gitignored (/build*/)
    os.makedirs(out_dir, exist_ok=True)
    so = os.path.join(out_dir, f"zp_memcount_{key}.so")
    if not os.path.exists(so):
        tmp = so + f".tmp{os.getpid()}"
        cmd = ["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI),
               "-I", os.path.join(torch_dir, "include"), src, "-L", os.path.join(torch_dir, "lib"), "-lc10",
               "-Wl,-rpath," + os.path.join(torch_dir, "lib"), "-o", tmp]
        subprocess.check_call(cmd)
        os.replace(tmp, so)
    return so


def install():
    global _lib
    if _lib is not None:
        return
    so = _build()
    lib = ctypes.CDLL(so)
    for f in ("zp_live", "zp_peak", "zp_allocs"):
        getattr(lib, f).restype = ctypes.c_longlong
    if lib.zp_install() != 1:
        raise RuntimeError("counting allocator was not installed (a higher-priority CPU allocator is set)")
    _lib = lib


def live():
    return int(_lib.zp_live())


def peak():
    return int(_lib.zp_peak())


def allocs():
    return int(_lib.zp_allocs())


def reset_peak():
    _lib.zp_reset_peak()


def set_peak(v):
    _lib.zp_set_peak(ctypes.c_longlong(int(v)))
