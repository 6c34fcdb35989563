// The AMX int8 peak loop (kernels/cpu/peak_fma.h): tdpbusd on register tiles only, the widest
// shape (16 x 16 int32 results, K = 64 bytes), four independent result tiles from two activation
// and two weight tiles, so the tile unit is never waiting on a previous product or on memory.
// The packed GEMMs' products are K = 32 (one block's integer sum each, gguf_packed_amx.cc), so
// they can reach at most about half of this.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/amx_tiles.h"
#include "kernels/cpu/peak_fma.h"

namespace ember::kernels {

double Int8DotLoopAmx(int64_t iterations, int64_t* ops_per_iteration) {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) config.Tile(t, 16, 64);
  alignas(64) uint8_t operands[16 * 64];
  // Operands from a volatile so the compiler cannot know them; the products wrap harmlessly.
  volatile uint8_t seed = 3;
  std::memset(operands, seed, sizeof(operands));
  alignas(64) int32_t result[16 * 16];
  {
    const AmxTileScope tiles(config);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, operands, 64);
    _tile_loadd(5, operands, 64);
    _tile_loadd(6, operands, 64);
    _tile_loadd(7, operands, 64);
    for (int64_t it = 0; it < iterations; ++it) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, result, 64);
  }
  *ops_per_iteration = int64_t{4} * 16 * 16 * 64 * 2;
  return static_cast<double>(static_cast<uint32_t>(result[0])) + 1.0;
}

}  // namespace ember::kernels
