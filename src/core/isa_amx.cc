// Built with the flags of every *_amx.cc kernel file (cmake/ember.cmake): the avx512 set plus
// AMX-TILE and AMX-INT8. No header, for isa_avx512.cc's reason.

namespace ember::internal {

// Declared in core/isa.h.
// GCC spells the AMX feature macros __AMX_TILE__ / __AMX_INT8__, clang __AMXTILE__ / __AMXINT8__.
bool CompilerTargetsAmx() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__AVX512BF16__) && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
    (defined(__AMX_INT8__) || defined(__AMXINT8__))
  return true;
#else
  return false;
#endif
}

}  // namespace ember::internal
