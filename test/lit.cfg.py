# -*- Python -*- lit configuration for comfyquant.
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "comfyquant"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["fixtures", "hostile", "unit", "CMakeLists.txt",
                   "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.comfyquant_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [os.path.join(config.comfyquant_obj_root, "bin"),
             config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["comfyquant-opt", "comfyquant-translate", "comfyquant-run", "comfyquant-compile",
     "comfyquant-quantize",
     "ptxemu-layouts"], tool_dirs)

src = config.comfyquant_src_root
config.substitutions.append(("%fixtures", os.path.join(src, "test", "fixtures")))
config.substitutions.append(("%hostile", os.path.join(src, "test", "hostile")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%comfyquant_bin",
                             os.path.join(config.comfyquant_obj_root, "bin")))
# comfyquant-run compiles into a cache directory: keep the tests' out of
# the user's home.
config.environment["COMFYQUANT_CACHE_DIR"] = os.path.join(
    config.test_exec_root, "comfyquant-cache")

# The CPU variants this machine runs, as `comfyquant-run --cpu-variants`
# answers with the runtime's own checks (cpuid, OS register state, AMX
# permission), so lit and the runtime cannot disagree: lit features
# cpu-<variant>, and %host_cpu_variants for tests that compile only what
# they run (compiled-kinds compiles every variant).
try:
    _listing = subprocess.run(
        [os.path.join(config.comfyquant_obj_root, "bin", "comfyquant-run"),
         "--cpu-variants"], capture_output=True, text=True, timeout=120,
        check=True).stdout
except (OSError, subprocess.SubprocessError) as e:
    lit_config.fatal("comfyquant-run --cpu-variants failed: %s" % e)
_all_variants, _host_variants = [], []
for _line in _listing.splitlines():
    _name, _, _answer = _line.partition(" ")
    _all_variants.append(_name)
    if _answer == "yes":
        config.available_features.add("cpu-" + _name)
        _host_variants.append(_name)
if not _host_variants:
    lit_config.fatal("comfyquant-run --cpu-variants: this CPU runs no variant")
config.substitutions.append(("%host_cpu_variants", ",".join(_host_variants)))
# The shape sweeps compile every variant, or with --param sweep_variants=host
# (LIT_OPTS) only the ones they run: the GCC and sanitizer builds of
# scripts/test, where the clang build has already compiled every variant of
# the same draw.
_sweep = lit_config.params.get("sweep_variants", "all")
if _sweep not in ("all", "host"):
    lit_config.fatal("--param sweep_variants=%s: expected all or host" % _sweep)
config.substitutions.append(
    ("%sweep_variants", ",".join(_all_variants if _sweep == "all" else _host_variants)))
# ... and run every activation dtype on every variant, or with --param
# sweep_dtypes=spread each dtype on some of them (shape_sweep.py
# spread_dtypes): the GCC and sanitizer builds again, for the same reason.
_sweep_dtypes = lit_config.params.get("sweep_dtypes", "all")
if _sweep_dtypes not in ("all", "spread"):
    lit_config.fatal("--param sweep_dtypes=%s: expected all or spread" % _sweep_dtypes)
config.substitutions.append(("%sweep_dtypes", _sweep_dtypes))

# GPU-executing tests need a CUDA driver (a lent GPU machine); everything
# else runs on the CPU.
if shutil.which("nvidia-smi"):
    config.available_features.add("cuda-driver")

# cuda-device: the runtime itself finds a driver and a GPU (comfyquant-run
# --devices exits 0), asked without the tests' fake driver.
def _has_cuda_device():
    run = os.path.join(config.comfyquant_obj_root, "bin", "comfyquant-run")
    env = {k: v for k, v in os.environ.items() if k != "COMFYQUANT_LIBCUDA"}
    try:
        return subprocess.run([run, "--devices"], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

if _has_cuda_device():
    config.available_features.add("cuda-device")
# The CUDA toolkit the compiler uses (ptxas, libdevice) is found through
# $CUDA_HOME where it is set; COMFYQUANT_SWEEP_SEED draws other shapes in
# the shape sweeps (docs/Testing.md).
llvm_config.with_system_environment(["CUDA_HOME", "CUDA_PATH",
                                     "COMFYQUANT_SWEEP_SEED"])
# cutlass: the CUTLASS/CuTe headers of the pinned PyPI package
# (nvidia-cutlass, unpacked by scripts/bootstrap; $COMFYQUANT_CUTLASS_INCLUDE
# overrides) and nvcc, for the oracles of the PTX emulator.
CUTLASS_VERSION = "4.2.0.0"
_cutlass = os.environ.get("COMFYQUANT_CUTLASS_INCLUDE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "comfyquant", "cutlass-" + CUTLASS_VERSION, "include")
_nvcc = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if os.path.exists(os.path.join(_cutlass, "cute", "layout.hpp")) and _nvcc:
    config.available_features.add("cutlass")
config.substitutions.append(("%cutlass_include", _cutlass))
config.substitutions.append(("%ptxemu_include", os.path.join(config.comfyquant_src_root, "runtime")))
config.substitutions.append(("%comfyquant_lib", os.path.join(config.comfyquant_obj_root, "lib")))
config.substitutions.append(("%nvcc", _nvcc or "nvcc"))
# The fake libcuda of the unit tests (host memory, logs launches).
config.substitutions.append(("%fake_libcuda",
                             os.path.join(config.comfyquant_obj_root, "lib",
                                          "libfakecuda.so")))

# A hung test fails after this many seconds instead of stalling the run
# (lit needs psutil to end a test's processes: python3-psutil, installed by
# scripts/bootstrap). --param test_timeout=N changes it.
try:
    import psutil  # noqa: F401
    lit_config.maxIndividualTestTime = int(
        lit_config.params.get("test_timeout", "900"))
except ImportError:
    lit_config.warning("python3-psutil is missing: no per-test time limit")

# What this machine is, read from /proc/cpuinfo here, independently of the
# runtime's own detection (cpuid) that decided the cpu-* features above, and
# every feature a test may require that is absent, with the reason: the
# UNSUPPORTED tests of this run are skipped for these reasons.
_flags = set()
try:
    with open("/proc/cpuinfo") as _f:
        for _line in _f:
            if _line.startswith("flags"):
                _flags = set(_line.split(":", 1)[1].split())
                break
except OSError:
    pass
_shown = sorted(f for f in _flags if f.startswith(("avx2", "avx512", "amx")))
lit_config.note("/proc/cpuinfo flags: " + (" ".join(_shown) or "(none of avx2, avx512*, amx*)"))
lit_config.note("CPU variants the runtime runs here: " + ", ".join(_host_variants))
for _name in _all_variants:
    if _name not in _host_variants:
        lit_config.note("feature cpu-%s absent: comfyquant-run --cpu-variants "
                        "says this CPU (or the OS) does not run it; tests "
                        "requiring it are UNSUPPORTED" % _name)
if "cuda-driver" not in config.available_features:
    lit_config.note("feature cuda-driver absent: no nvidia-smi on PATH")
if "cutlass" not in config.available_features:
    lit_config.note("feature cutlass absent: no CuTe headers at %s (scripts/bootstrap "
                    "unpacks nvidia-cutlass==%s there) or no nvcc" % (_cutlass, CUTLASS_VERSION))
if "cuda-device" not in config.available_features:
    lit_config.note("feature cuda-device absent: comfyquant-run --devices "
                    "finds no CUDA driver with a GPU")
