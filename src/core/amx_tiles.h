// The AMX tile configuration, for the *_amx.cc kernel files only (it uses the tile intrinsics, so
// every copy of these inline functions is built with the AMX flags; a baseline file including it
// stops here).
//
// ldtilecfg is per thread: the eight tile registers' shapes belong to the thread that loaded them.
// A tile kernel therefore opens an AmxTileScope for the span of its own work (one ThreadPool chunk,
// on whichever thread runs it), which loads its shapes and releases the tiles on the way out, so
// no thread is left holding a configuration another kernel did not choose, and the kernel's 8 KiB
// of tile data is back in its initial state (nothing for the OS to save at a context switch)
// between calls. Linux's permission for the tile data is process-wide (cpu_features.h), granted
// before the amx level can be selected.
#pragma once

// GCC spells the feature macro __AMX_TILE__, clang (the asan and tsan presets) __AMXTILE__.
#if !defined(__AMX_TILE__) && !defined(__AMXTILE__)
#error "core/amx_tiles.h is for files built with the AMX flags (*_amx.cc)"
#endif

#include <immintrin.h>

#include <cstdint>

namespace ember {

// The 64-byte ldtilecfg operand, palette 1: per tile its rows and bytes per row.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  constexpr AmxTileConfig& Tile(int tile, int num_rows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(num_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
    return *this;
  }
};
static_assert(sizeof(AmxTileConfig) == 64);

// Loads `config` for this thread; releases the tiles when it goes out of scope.
class AmxTileScope {
 public:
  explicit AmxTileScope(const AmxTileConfig& config) { _tile_loadconfig(&config); }
  ~AmxTileScope() { _tile_release(); }
  AmxTileScope(const AmxTileScope&) = delete;
  AmxTileScope& operator=(const AmxTileScope&) = delete;
};

}  // namespace ember
