// hk/hk.hpp — everything a C++ user of hopperkit includes.
#pragma once

#include "hk/device.hpp"
#include "hk/error.hpp"
#include "hk/ops/gelu.hpp"
#include "hk/ops/gemm.hpp"
#include "hk/registry.hpp"
#include "hk/tensor.hpp"
