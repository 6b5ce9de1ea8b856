// Conversions between LibTorch's scalar types and the trace's DType, for the collectives'
// records and the backends' type dispatch.
#pragma once

#include <c10/core/ScalarType.h>

#include "trace/schema.h"

namespace dpscope::comm {

// The trace's name for `type`; UInt8 for types the trace has no name for.
trace::DType to_trace_dtype(c10::ScalarType type);

}  // namespace dpscope::comm
