// Deterministic parameter initialisation that depends only on (seed, tensor name, element
// index in the full tensor): not on how the tensor is split into blocks, on the thread count or
// on the order blocks are visited. So a program sharded any way starts from the same weights.
//
// For element e (flat row-major index into the full checkpoint tensor) of tensor `name`:
//   mix(z)  = splitmix64's output function:  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//             z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
//   key     = mix(mix(seed) ^ fnv1a64(name))
//   r_j     = mix(key + j * 0x9E3779B97F4A7C15) for j = 2e+1, 2e+2   (a SplitMix64 stream)
//   u_j     = ((r_j >> 11) + 1) * 2^-53        in (0, 1]
//   value   = float(init_std * sqrt(-2 ln u_1) * cos(2 pi u_2))      (Box-Muller, in double)
// KaimingUniform (LoRA's A): value = float((2 (r_{2e+1} >> 11) 2^-53 - 1) / sqrt(fan_in)), fan_in
// the full tensor's last dimension: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's
// kaiming_uniform_(a = sqrt 5) bound.
#pragma once

#include "megart/program.h"
#include "megart/splitmix.h"

#include <cstdint>

namespace megart {

uint64_t fnv1a64(const char *text);
// The per-tensor key above.
uint64_t init_tensor_key(uint64_t seed, const char *name);
// A standard normal sample for element `element` of the tensor with this key.
double init_standard_normal(uint64_t key, uint64_t element);
// A sample of U[-1, 1) for element `element` (KaimingUniform before its bound).
double init_symmetric_uniform(uint64_t key, uint64_t element);

// Fills block[block_numel(desc)] with desc's initial values: Normal -> init_std * N(0,1) as
// above, KaimingUniform as above, Zeros -> 0, Ones -> 1; a padded block's padding (past full_shape) -> 0.
void init_param_block(const ParamDesc &desc, uint64_t seed, float *block);

} // namespace megart
