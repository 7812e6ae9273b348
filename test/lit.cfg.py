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
    ["comfyquant-opt", "comfyquant-translate", "comfyquant-run", "comfyquant-compile"], tool_dirs)

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
# $CUDA_HOME where it is set.
llvm_config.with_system_environment(["CUDA_HOME", "CUDA_PATH"])
# The fake libcuda of the unit tests (host memory, logs launches).
config.substitutions.append(("%fake_libcuda",
                             os.path.join(config.comfyquant_obj_root, "lib",
                                          "libfakecuda.so")))
