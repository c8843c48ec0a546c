// IEEE half and bfloat16 to and from float, for model files (safetensors) and for computing at
// reduced precision. float to half/bf16 rounds to nearest even, overflows to infinity, handles
// subnormals and keeps NaN a NaN.
#pragma once

#include <cstdint>

namespace tessera {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace tessera
