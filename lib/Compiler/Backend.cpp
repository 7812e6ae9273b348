//===- Backend.cpp - one target back end of the compile driver ------------===//
#include "comfyquant/Compiler/Backend.h"

using namespace mlir::comfyquant;

// The vtable's home.
Backend::~Backend() = default;
