// The LibTorch headers that nearly every file of the engine, the tutorials and the engine's tests
// parses, compiled once per build as a precompiled header (engine/CMakeLists.txt). Parsing them
// was half of a file's 20-30 s compile; the rest is our own code. Only LibTorch's own headers
// belong here: a file still includes what it uses, so it builds the same without this one.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
