// hk/hk.hpp — everything a C++ user of hopperkit includes.
#pragma once

#include "hk/device.hpp"
#include "hk/error.hpp"
#include "hk/ops/attention.hpp"
#include "hk/ops/broadcast.hpp"
#include "hk/ops/conv2d.hpp"
#include "hk/ops/gelu.hpp"
#include "hk/ops/gemm.hpp"
#include "hk/ops/gemm_fp8.hpp"
#include "hk/ops/rmsnorm.hpp"
#include "hk/ops/rope.hpp"
#include "hk/ops/row_sum.hpp"
#include "hk/ops/softmax.hpp"
#include "hk/ops/swiglu.hpp"
#include "hk/ops/weighted_sum.hpp"
#include "hk/registry.hpp"
#include "hk/tensor.hpp"
