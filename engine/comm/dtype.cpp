// Scalar type conversions (see dtype.h).
#include "engine/comm/dtype.h"

namespace dpscope::comm {

trace::DType to_trace_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return trace::DType::Float32;
    case c10::ScalarType::Half: return trace::DType::Float16;
    case c10::ScalarType::BFloat16: return trace::DType::BFloat16;
    case c10::ScalarType::Double: return trace::DType::Float64;
    case c10::ScalarType::Long: return trace::DType::Int64;
    case c10::ScalarType::Int: return trace::DType::Int32;
    case c10::ScalarType::Char: return trace::DType::Int8;
    case c10::ScalarType::Bool: return trace::DType::Bool;
    default: return trace::DType::UInt8;
  }
}

}  // namespace dpscope::comm
