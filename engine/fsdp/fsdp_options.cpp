// What FSDP's options derive from the modes `dpscope train` names (fsdp_options.h): the dtypes
// of mixed precision.
#include "engine/fsdp/fsdp_options.h"

namespace dpscope::fsdp {

MixedPrecision mixed_precision_for(ComputePrecision precision, bool reduce_fp32) {
  MixedPrecision mp;
  switch (precision) {
    case ComputePrecision::Fp32: return mp;
    case ComputePrecision::Fp16: mp.param_dtype = c10::ScalarType::Half; break;
    case ComputePrecision::Bf16: mp.param_dtype = c10::ScalarType::BFloat16; break;
  }
  mp.buffer_dtype = mp.param_dtype;
  mp.reduce_dtype = reduce_fp32 ? c10::ScalarType::Float : mp.param_dtype;
  return mp;
}

}  // namespace dpscope::fsdp
