// The source of ComfyQuantMLIRHeaders: the target exists to build the
// precompiled MLIR header (cmake/PrecompiledHeaders.cmake) that the compiler
// libraries reuse.
